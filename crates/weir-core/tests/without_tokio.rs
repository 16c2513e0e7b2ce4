//! The Limiter without tokio: the synchronous verbs (`check_now` and the rest) on the memory
//! store, `wait_blocking`, and the async `wait` under a hand-written executor (no tokio
//! runtime), which must sleep, not spin: each test counts the checks that reach the store.

#![allow(clippy::unwrap_used, clippy::panic)] // tests state expectations by panicking

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};
use std::time::Duration;

use weir_core::{
    CheckError, Clock, Decision, Decisions, Key, Limiter, ManualClock, MemoryStore, Op, Outcome,
    Rule, ScopedKey, ScopedLimits, Store, SyncStore, SystemClock,
};

/// The memory store, counting the operations that reach it.
#[derive(Clone, Default)]
struct Counting {
    store: MemoryStore,
    ops: Arc<AtomicUsize>,
}

impl Counting {
    fn ops(&self) -> usize {
        self.ops.load(Ordering::SeqCst)
    }
}

impl Store for Counting {
    fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl Future<Output = Result<Outcome, CheckError>> + Send {
        self.ops.fetch_add(1, Ordering::SeqCst);
        self.store.apply(key, rule, op, now_ns)
    }

    fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> impl Future<Output = Result<Decisions, CheckError>> + Send {
        self.ops.fetch_add(1, Ordering::SeqCst);
        self.store.check_all(limits, cost, now_ns)
    }
}

impl SyncStore for Counting {
    fn apply_scoped_now(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        self.ops.fetch_add(1, Ordering::SeqCst);
        self.store.apply_scoped_now(key, rule, op, now_ns)
    }

    fn check_all_scoped_now(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        self.ops.fetch_add(1, Ordering::SeqCst);
        self.store.check_all_scoped_now(limits, cost, now_ns)
    }
}

/// A minimal executor: polls on this thread, parks it while pending. Returns the output
/// and the number of polls.
fn block_on<F: Future>(future: F) -> (F::Output, usize) {
    struct Unpark(Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return (output, polls);
        }
        thread::park();
    }
}

/// A limiter on the system clock whose key has just had its one request per 20 ms, and the
/// clock's reading before that request.
fn one_per_20ms_used(key: &str) -> (Limiter<Counting, SystemClock>, Key, Rule, u64) {
    let limiter = Limiter::new(Counting::default(), SystemClock::new());
    let rule = Rule::gcra(1, Duration::from_millis(20), 1).unwrap();
    let key = Key::new(key).unwrap();
    let start_ns = limiter.clock().now_ns();
    assert!(limiter.check_now(&key, &rule, 1).unwrap().allowed);
    (limiter, key, rule, start_ns)
}

/// `waited` is allowed, 20 ms after `start_ns` at the earliest, after at most two checks:
/// one denied, a sleep until its retry_after, one allowed (a single allowed one if this
/// thread was descheduled for 20 ms before the wait). A spinning wait checks thousands
/// of times.
fn assert_slept(limiter: &Limiter<Counting, SystemClock>, start_ns: u64, waited: &Decision) {
    assert!(waited.allowed);
    assert!(limiter.clock().now_ns() - start_ns >= 20_000_000);
    let checks = limiter.store().ops() - 1;
    assert!(checks <= 2, "{checks} checks: the wait spun");
}

#[test]
fn async_wait_without_a_runtime_sleeps_instead_of_spinning() {
    // Before: SystemClock's sleep returned at once outside a tokio runtime (or panicked,
    // with the tokio feature), so `wait` re-checked in a loop until allowed.
    let (limiter, key, rule, start_ns) = one_per_20ms_used("no-runtime");
    let (waited, polls) = block_on(limiter.wait(&key, &rule, 1, Duration::from_secs(5)));
    assert_slept(&limiter, start_ns, &waited.unwrap());
    assert!(polls <= 10, "{polls} polls: the sleep spun");
}

#[test]
fn wait_blocking_sleeps_the_thread_on_the_system_clock() {
    let (limiter, key, rule, start_ns) = one_per_20ms_used("blocking");
    let waited = limiter.wait_blocking(&key, &rule, 1, Duration::from_secs(5));
    assert_slept(&limiter, start_ns, &waited.unwrap());
    let store = limiter.store();

    // A wait that cannot fit gives up at once, after one check.
    let hourly = Rule::gcra(1, Duration::from_secs(3600), 1).unwrap();
    assert!(limiter.check_now(&key, &hourly, 1).unwrap().allowed);
    let before = store.ops();
    let gave_up = limiter
        .wait_blocking(&key, &hourly, 1, Duration::from_secs(60))
        .unwrap();
    assert!(!gave_up.allowed);
    assert_eq!(store.ops(), before + 1);
}

#[test]
fn wait_blocking_wakes_when_a_manual_clock_passes_retry_after() {
    let clock = ManualClock::new(1_000_000_000_000);
    let store = Counting::default();
    let limiter = Limiter::new(store.clone(), clock.clone());
    let rule = Rule::per_second(1).unwrap();
    let key = Key::new("manual").unwrap();
    assert!(limiter.check_now(&key, &rule, 1).unwrap().allowed);

    let waiter = thread::spawn({
        let (limiter, key) = (limiter.clone(), key.clone());
        move || limiter.wait_blocking(&key, &rule, 1, Duration::from_secs(2))
    });
    while clock.sleepers() == 0 {
        thread::yield_now();
    }
    clock.advance(Duration::from_millis(999));
    assert!(!waiter.is_finished());
    clock.advance(Duration::from_millis(1));
    assert!(waiter.join().unwrap().unwrap().allowed);
    assert_eq!(store.ops(), 3);
}

#[test]
fn the_synchronous_verbs_share_the_async_verbs_records() {
    let clock = ManualClock::new(1_000_000_000_000);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let key = Key::from(7u64);
    let five = Rule::per_second(5).unwrap();
    let ten = Rule::per_second(10).unwrap();

    // Two rules on one key are two records, synchronously as asynchronously.
    for _ in 0..5 {
        assert!(limiter.check_now(&key, &five, 1).unwrap().allowed);
    }
    assert!(!limiter.check_now(&key, &five, 1).unwrap().allowed);
    assert_eq!(limiter.peek_now(&key, &ten).unwrap().remaining, 10);
    let (async_peek, _) = block_on(limiter.peek(&key, &five));
    assert_eq!(async_peek.unwrap(), limiter.peek_now(&key, &five).unwrap());

    // check_all, all-or-nothing.
    let both = [(key.clone(), five), (key.clone(), ten)];
    let d = limiter.check_all_now(&both, 1).unwrap();
    assert!(!d.allowed);
    assert_eq!(limiter.peek_now(&key, &ten).unwrap().remaining, 10);

    // penalty, reward, inspect, block, unblock, reset.
    limiter.reset_now(&key, &five).unwrap();
    assert_eq!(limiter.penalty_now(&key, &five, 2).unwrap().remaining, 3);
    assert_eq!(limiter.reward_now(&key, &five, 1).unwrap().remaining, 4);
    assert_eq!(limiter.inspect_now(&key, &five).unwrap().used, 1);
    limiter
        .block_now(&key, &five, Duration::from_secs(60))
        .unwrap();
    assert!(!limiter.check_now(&key, &five, 1).unwrap().allowed);
    limiter.unblock_now(&key, &five).unwrap();
    assert!(limiter.check_now(&key, &five, 1).unwrap().allowed);

    // Leases.
    let lock = Rule::concurrency(1).unwrap();
    let job = Key::new("job").unwrap();
    let ttl = Duration::from_secs(30);
    assert!(limiter.acquire_now(&job, &lock, "a", ttl).unwrap().allowed);
    assert!(!limiter.acquire_now(&job, &lock, "b", ttl).unwrap().allowed);
    assert!(limiter.release_now(&job, &lock, "a").unwrap());
    assert!(limiter.acquire_now(&job, &lock, "b", ttl).unwrap().allowed);

    // Errors are the async verbs' errors.
    assert!(matches!(
        limiter.check_now(&key, &five, 6),
        Err(CheckError::CostAboveCapacity { cost: 6, .. })
    ));
}
