//! The library's front door: a [`Limiter`] reads `now` from its [`Clock`] once per call and
//! asks its [`Store`] to apply one step. Everything a user does to a key goes through here;
//! adapters (tower layer, server, proxy) build keys and rules and call it. The verbs are
//! async; over a store that decides without waiting ([`SyncStore`], the memory store) they
//! have synchronous twins, in `limiter/sync.rs`. A limit with no key at all (one budget for
//! the program) is a [`DirectLimiter`], in `limiter/direct.rs`: one atomic word, no store.

mod direct;
mod key_bytes;
mod keyed;
mod sync;
mod wait;

pub use direct::DirectLimiter;
pub use keyed::KeyedLimiter;
pub use sync::SyncStore;
pub use wait::{Paced, Wait, WaitStep};

use std::time::Duration;

use crate::clock::{Clock, SystemClock};
use crate::decision::{Decision, Usage};
use crate::error::{CheckError, StoreError};
use crate::key::Key;
use crate::rule::Rule;
use crate::step::{Op, Outcome};
use crate::store::{Decisions, MemoryStore, ScopedKey, ScopedLimits, Store};
use crate::time::duration_ns;

/// Rate limits keys against rules, on a store, by a clock.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Key, Limiter, ManualClock, MemoryStore, Rule};
///
/// # tokio_test_block_on(async {
/// let clock = ManualClock::new(0);
/// let limiter = Limiter::new(MemoryStore::default(), clock.clone());
/// let rule = Rule::per_second(2)?;
/// let key = Key::new("api:alice")?;
///
/// assert!(limiter.check(&key, &rule, 1).await?.allowed);
/// assert!(limiter.check(&key, &rule, 1).await?.allowed);
/// let denied = limiter.check(&key, &rule, 1).await?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Duration::from_millis(500));
///
/// clock.advance(Duration::from_millis(500));
/// assert!(limiter.check(&key, &rule, 1).await?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Limiter<S = MemoryStore, C = SystemClock> {
    store: S,
    clock: C,
}

impl Default for Limiter {
    /// The embedded memory store and the system clock.
    fn default() -> Self {
        Self::new(MemoryStore::default(), SystemClock::new())
    }
}

/// The decision of an operation that returns one. Any other outcome is a store bug, and
/// an error (never a decision that could read as allowed).
#[inline]
fn decision(outcome: Outcome) -> Result<Decision, CheckError> {
    match outcome {
        Outcome::Decision(d) => Ok(d),
        other => Err(unexpected(other)),
    }
}

/// The usage an inspect returns.
fn usage(outcome: Outcome) -> Result<Usage, CheckError> {
    match outcome {
        Outcome::Usage(u) => Ok(u),
        other => Err(unexpected(other)),
    }
}

/// Whether a release let go of a live lease.
fn released(outcome: Outcome) -> Result<bool, CheckError> {
    match outcome {
        Outcome::Released(released) => Ok(released),
        other => Err(unexpected(other)),
    }
}

fn unexpected(outcome: Outcome) -> CheckError {
    CheckError::Store(StoreError::Corrupt(format!(
        "the store answered with {outcome:?} where a different outcome was due"
    )))
}

impl<S: Store, C: Clock> Limiter<S, C> {
    /// A limiter over `store`, reading time from `clock`.
    pub fn new(store: S, clock: C) -> Self {
        Self { store, clock }
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Applies `op` to the record of (`rule`, `key`) ([`ScopedKey::scoped`]), so two
    /// rules never share a record.
    async fn run(&self, key: &Key, rule: &Rule, op: Op<'_>) -> Result<Outcome, CheckError> {
        self.store
            .apply(ScopedKey::scoped(key), rule, op, self.clock.now_ns())
            .await
    }

    /// Checks a request of `cost` units and consumes them if allowed. `cost == 0` is a peek.
    /// A cost above the rule's limit is [`CheckError::CostAboveCapacity`], not a denial.
    pub async fn check(&self, key: &Key, rule: &Rule, cost: u64) -> Result<Decision, CheckError> {
        self.check_at(key, rule, cost, self.clock.now_ns()).await
    }

    /// [`check`](Self::check) at `now_ns`, an instant of this limiter's clock the caller
    /// has just read (the engine times each store call from it: one clock read a decision
    /// fewer, as [`check_all`](Self::check_all)'s callers do).
    pub async fn check_at(
        &self,
        key: &Key,
        rule: &Rule,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decision, CheckError> {
        self.store
            .apply(ScopedKey::scoped(key), rule, Op::Check { cost }, now_ns)
            .await
            .and_then(decision)
    }

    /// Whether a request of cost 1 would pass now, without consuming anything.
    pub async fn peek(&self, key: &Key, rule: &Rule) -> Result<Decision, CheckError> {
        self.check(key, rule, 0).await
    }

    /// Checks several limits at once, all-or-nothing: nothing is consumed unless all allow
    /// (e.g. 10 per second and 1000 per hour for one user). One key may appear under
    /// several rules: each (rule, key) is its own record. A (rule, key) must not appear
    /// twice.
    pub async fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
    ) -> Result<Decisions, CheckError> {
        self.store
            .check_all(ScopedLimits::scoped(limits), cost, self.clock.now_ns())
            .await
    }

    /// Adds `n` units of usage (e.g. an expensive request found out after the fact, a
    /// failed login). Returns the state after, as a peek.
    pub async fn penalty(&self, key: &Key, rule: &Rule, n: u64) -> Result<Decision, CheckError> {
        self.run(key, rule, Op::Penalty { n })
            .await
            .and_then(decision)
    }

    /// Gives `n` units of usage back (e.g. a request that turned out to be free). Returns
    /// the state after, as a peek.
    pub async fn reward(&self, key: &Key, rule: &Rule, n: u64) -> Result<Decision, CheckError> {
        self.run(key, rule, Op::Reward { n })
            .await
            .and_then(decision)
    }

    /// Blocks the key for `duration`: every check is denied until then.
    pub async fn block(
        &self,
        key: &Key,
        rule: &Rule,
        duration: Duration,
    ) -> Result<(), CheckError> {
        let duration_ns = duration_ns(duration);
        self.run(key, rule, Op::Block { duration_ns })
            .await
            .map(drop)
    }

    /// Lets the key try again now: lifts a block or a lockout and forgives its strikes;
    /// under a rule with a lockout it also clears the usage that engaged it (otherwise the
    /// next attempt would lock the key out again, escalated). Under a rule without one,
    /// usage is kept. [`reset`](Self::reset) is the full wipe.
    pub async fn unblock(&self, key: &Key, rule: &Rule) -> Result<(), CheckError> {
        self.run(key, rule, Op::Unblock).await.map(drop)
    }

    /// Forgets the key: usage, block and lockout strikes.
    pub async fn reset(&self, key: &Key, rule: &Rule) -> Result<(), CheckError> {
        self.run(key, rule, Op::Reset).await.map(drop)
    }

    /// Reports the key's usage, block and strikes without changing anything.
    pub async fn inspect(&self, key: &Key, rule: &Rule) -> Result<Usage, CheckError> {
        self.run(key, rule, Op::Inspect).await.and_then(usage)
    }

    /// Takes a concurrency lease on `key` for `holder`, living `ttl` unless released first.
    /// Re-entrant for the same holder. Denied when all leases are taken.
    pub async fn acquire(
        &self,
        key: &Key,
        rule: &Rule,
        holder: &str,
        ttl: Duration,
    ) -> Result<Decision, CheckError> {
        let ttl_ns = duration_ns(ttl);
        self.run(key, rule, Op::Acquire { holder, ttl_ns })
            .await
            .and_then(decision)
    }

    /// Releases one hold of `holder`'s lease. Returns whether it held a live lease.
    pub async fn release(&self, key: &Key, rule: &Rule, holder: &str) -> Result<bool, CheckError> {
        self.run(key, rule, Op::Release { holder })
            .await
            .and_then(released)
    }

    /// Waits until a request of `cost` is allowed, then consumes it; gives up (returning the
    /// denial) when that would take longer than `max_wait`. Sleeps on the clock until each
    /// `retry_after`, never spinning. For the leaky-bucket queue it also sleeps the
    /// allowed request's `delay`, so it returns when the request may go.
    pub async fn wait(
        &self,
        key: &Key,
        rule: &Rule,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, CheckError> {
        let wait = Wait::new(self.clock.now_ns(), max_wait);
        loop {
            let d = self.check(key, rule, cost).await?;
            match wait.after(&d, self.clock.now_ns()) {
                WaitStep::Go | WaitStep::GiveUp => return Ok(d),
                WaitStep::GoAt(go_ns) => {
                    self.clock.sleep_until(go_ns).await;
                    return Ok(d);
                }
                WaitStep::RetryAt(retry_ns) => self.clock.sleep_until(retry_ns).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    fn limiter() -> (Limiter<MemoryStore, ManualClock>, ManualClock) {
        let clock = ManualClock::new(1_000_000_000_000);
        (Limiter::new(MemoryStore::default(), clock.clone()), clock)
    }

    #[tokio::test]
    async fn wait_sleeps_until_retry_after_and_gives_up_past_max_wait() {
        let (limiter, clock) = limiter();
        let rule = Rule::per_second(1).unwrap();
        let key = Key::new("w").unwrap();
        limiter.check(&key, &rule, 1).await.unwrap();

        let gave_up = limiter
            .wait(&key, &rule, 1, Duration::from_millis(999))
            .await
            .unwrap();
        assert!(!gave_up.allowed, "a wait of 1 s does not fit in 999 ms");

        let waiter = {
            let limiter = limiter.clone();
            let key = key.clone();
            tokio::spawn(async move { limiter.wait(&key, &rule, 1, Duration::from_secs(2)).await })
        };
        while clock.sleepers() == 0 {
            tokio::task::yield_now().await;
        }
        assert!(!waiter.is_finished());
        clock.advance(Duration::from_secs(1));
        assert!(waiter.await.unwrap().unwrap().allowed);
    }

    #[tokio::test]
    async fn check_at_decides_the_record_check_does_at_the_instant_given() {
        let (limiter, clock) = limiter();
        let rule = Rule::per_second(1).unwrap();
        let key = Key::new("at").unwrap();
        let now = clock.now_ns();
        assert!(limiter.check_at(&key, &rule, 1, now).await.unwrap().allowed);
        // The same record as `check`'s, at the clock's instant: spent.
        assert!(!limiter.check(&key, &rule, 1).await.unwrap().allowed);
        // A second on, by the instant given alone (the clock has not moved).
        let later = now + 1_000_000_000;
        let at_later = || limiter.check_at(&key, &rule, 1, later);
        assert!(at_later().await.unwrap().allowed);
        assert!(!at_later().await.unwrap().allowed);
    }

    #[tokio::test]
    async fn two_rules_on_one_key_never_disturb_each_other() {
        let (limiter, _clock) = limiter();
        let key = Key::new("user:7").unwrap();
        // Another algorithm on the same key used to start the record fresh.
        let gcra = Rule::gcra(1, Duration::from_secs(1), 1).unwrap();
        let log = Rule::sliding_log(1, Duration::from_secs(60)).unwrap();
        assert!(limiter.check(&key, &gcra, 1).await.unwrap().allowed);
        assert!(limiter.check(&key, &log, 1).await.unwrap().allowed);
        assert!(!limiter.check(&key, &gcra, 1).await.unwrap().allowed);
        assert!(!limiter.check(&key, &log, 1).await.unwrap().allowed);
        // Two rules of one algorithm used to share one budget.
        let five = Rule::per_second(5).unwrap();
        let ten = Rule::per_second(10).unwrap();
        for _ in 0..5 {
            assert!(limiter.check(&key, &five, 1).await.unwrap().allowed);
        }
        assert!(!limiter.check(&key, &five, 1).await.unwrap().allowed);
        for _ in 0..10 {
            assert!(limiter.check(&key, &ten, 1).await.unwrap().allowed);
        }
        assert!(!limiter.check(&key, &ten, 1).await.unwrap().allowed);
        // All-or-nothing over one key under two rules.
        let both = [(key.clone(), five), (key.clone(), gcra)];
        let d = limiter.check_all(&both, 1).await.unwrap();
        assert!(!d.allowed && !d.each[0].allowed && !d.each[1].allowed);
        // Operator verbs reach only their rule's record.
        limiter.reset(&key, &five).await.unwrap();
        assert_eq!(limiter.peek(&key, &five).await.unwrap().remaining, 5);
        assert_eq!(limiter.peek(&key, &ten).await.unwrap().remaining, 0);
    }

    #[tokio::test]
    async fn a_named_rule_keeps_its_keys_state_when_it_changes() {
        let (limiter, _clock) = limiter();
        let key = Key::new("user:7").unwrap();
        let v1 = Rule::fixed_window(5, Duration::from_secs(60))
            .unwrap()
            .named("api");
        let v2 = Rule::fixed_window(8, Duration::from_secs(60))
            .unwrap()
            .named("api");
        for _ in 0..5 {
            assert!(limiter.check(&key, &v1, 1).await.unwrap().allowed);
        }
        // The count carries over into the new limit: 3 more, not 8.
        assert_eq!(limiter.peek(&key, &v2).await.unwrap().remaining, 3);
        // An unnamed rule with v2's parameters is another rule.
        let unnamed = Rule::fixed_window(8, Duration::from_secs(60)).unwrap();
        assert_eq!(limiter.peek(&key, &unnamed).await.unwrap().remaining, 8);
    }

    #[tokio::test]
    async fn a_mutex_with_a_timed_lease() {
        let (limiter, clock) = limiter();
        let lock = Rule::concurrency(1).unwrap();
        let key = Key::new("job:nightly").unwrap();
        let ttl = Duration::from_secs(30);
        assert!(
            limiter
                .acquire(&key, &lock, "worker-1", ttl)
                .await
                .unwrap()
                .allowed
        );
        assert!(
            !limiter
                .acquire(&key, &lock, "worker-2", ttl)
                .await
                .unwrap()
                .allowed
        );
        // worker-1 crashes; its lease expires.
        clock.advance(ttl);
        assert!(
            limiter
                .acquire(&key, &lock, "worker-2", ttl)
                .await
                .unwrap()
                .allowed
        );
        assert!(limiter.release(&key, &lock, "worker-2").await.unwrap());
        assert!(!limiter.release(&key, &lock, "worker-2").await.unwrap());
    }
}
