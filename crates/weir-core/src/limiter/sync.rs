//! The [`Limiter`]'s synchronous verbs, for programs without an async runtime: over a
//! [`SyncStore`] (the embedded [`MemoryStore`]), each async verb has a twin suffixed `_now`
//! that returns the decision at once, and [`wait`](Limiter::wait) has
//! [`wait_blocking`](Limiter::wait_blocking), which sleeps the thread. A twin reads the clock
//! once and asks for the same (rule, key) record as its async verb: the two share budgets.

use std::time::Duration;

use super::wait::{Wait, WaitStep};
use super::{decision, released, usage, Limiter};
use crate::clock::Clock;
use crate::decision::{Decision, Usage};
use crate::error::CheckError;
use crate::key::Key;
use crate::rule::Rule;
use crate::step::{Op, Outcome};
use crate::store::{Decisions, MemoryStore, Store};
use crate::time::duration_ns;

/// A [`Store`] that decides without waiting, so that a [`Limiter`] over it also has
/// synchronous verbs ([`Limiter::check_now`] and the rest), usable without an async runtime.
/// The embedded [`MemoryStore`] is one; a store over the network is not.
///
/// Each method answers what its async twin would, at once: the same record, the same step
/// (the memory store's async methods are these, in a ready future). A store whose two
/// answers differed would give a program that mixes sync and async calls two budgets.
pub trait SyncStore: Store {
    /// [`Store::apply`] on a [`ScopedKey::scoped`](crate::ScopedKey::scoped) key, synchronously.
    fn apply_scoped_now(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError>;

    /// [`Store::check_all`] on [`ScopedLimits::scoped`](crate::ScopedLimits::scoped) limits,
    /// synchronously.
    fn check_all_scoped_now(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError>;
}

impl SyncStore for MemoryStore {
    #[inline]
    fn apply_scoped_now(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        MemoryStore::apply_scoped_now(self, key, rule, op, now_ns)
    }

    fn check_all_scoped_now(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        MemoryStore::check_all_scoped_now(self, limits, cost, now_ns)
    }
}

/// Synchronous verbs, for programs without an async runtime.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Key, Limiter, ManualClock, MemoryStore, Rule};
///
/// let clock = ManualClock::new(0);
/// let limiter = Limiter::new(MemoryStore::default(), clock.clone());
/// let rule = Rule::per_second(2)?;
/// let key = Key::new("api:alice")?;
///
/// assert!(limiter.check_now(&key, &rule, 1)?.allowed);
/// assert!(limiter.check_now(&key, &rule, 1)?.allowed);
/// let denied = limiter.check_now(&key, &rule, 1)?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Duration::from_millis(500));
///
/// clock.advance(Duration::from_millis(500));
/// assert!(limiter.peek_now(&key, &rule)?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl<S: SyncStore, C: Clock> Limiter<S, C> {
    /// Applies `op` to the record of (`rule`, `key`), now.
    #[inline]
    fn run_now(&self, key: &Key, rule: &Rule, op: Op<'_>) -> Result<Outcome, CheckError> {
        self.store
            .apply_scoped_now(key, rule, op, self.clock.now_ns())
    }

    /// [`check`](Self::check), synchronously.
    #[inline]
    pub fn check_now(&self, key: &Key, rule: &Rule, cost: u64) -> Result<Decision, CheckError> {
        self.run_now(key, rule, Op::Check { cost })
            .and_then(decision)
    }

    /// [`peek`](Self::peek), synchronously.
    pub fn peek_now(&self, key: &Key, rule: &Rule) -> Result<Decision, CheckError> {
        self.check_now(key, rule, 0)
    }

    /// [`check_all`](Self::check_all), synchronously.
    pub fn check_all_now(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
    ) -> Result<Decisions, CheckError> {
        self.store
            .check_all_scoped_now(limits, cost, self.clock.now_ns())
    }

    /// [`penalty`](Self::penalty), synchronously.
    pub fn penalty_now(&self, key: &Key, rule: &Rule, n: u64) -> Result<Decision, CheckError> {
        self.run_now(key, rule, Op::Penalty { n })
            .and_then(decision)
    }

    /// [`reward`](Self::reward), synchronously.
    pub fn reward_now(&self, key: &Key, rule: &Rule, n: u64) -> Result<Decision, CheckError> {
        self.run_now(key, rule, Op::Reward { n }).and_then(decision)
    }

    /// [`block`](Self::block), synchronously.
    pub fn block_now(&self, key: &Key, rule: &Rule, duration: Duration) -> Result<(), CheckError> {
        let duration_ns = duration_ns(duration);
        self.run_now(key, rule, Op::Block { duration_ns }).map(drop)
    }

    /// [`unblock`](Self::unblock), synchronously.
    pub fn unblock_now(&self, key: &Key, rule: &Rule) -> Result<(), CheckError> {
        self.run_now(key, rule, Op::Unblock).map(drop)
    }

    /// [`reset`](Self::reset), synchronously.
    pub fn reset_now(&self, key: &Key, rule: &Rule) -> Result<(), CheckError> {
        self.run_now(key, rule, Op::Reset).map(drop)
    }

    /// [`inspect`](Self::inspect), synchronously.
    pub fn inspect_now(&self, key: &Key, rule: &Rule) -> Result<Usage, CheckError> {
        self.run_now(key, rule, Op::Inspect).and_then(usage)
    }

    /// [`acquire`](Self::acquire), synchronously.
    pub fn acquire_now(
        &self,
        key: &Key,
        rule: &Rule,
        holder: &str,
        ttl: Duration,
    ) -> Result<Decision, CheckError> {
        let ttl_ns = duration_ns(ttl);
        self.run_now(key, rule, Op::Acquire { holder, ttl_ns })
            .and_then(decision)
    }

    /// [`release`](Self::release), synchronously.
    pub fn release_now(&self, key: &Key, rule: &Rule, holder: &str) -> Result<bool, CheckError> {
        self.run_now(key, rule, Op::Release { holder })
            .and_then(released)
    }

    /// [`wait`](Self::wait), blocking the calling thread: it sleeps the thread until each
    /// `retry_after` ([`Clock::sleep_until_blocking`]: `std::thread::sleep` on the system
    /// clock), never spinning, and gives up (returning the denial) when the wait would take
    /// longer than `max_wait`. Never call it from async code, where it would block the
    /// executor: use `wait` there.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{Key, Limiter, Rule};
    ///
    /// let limiter = Limiter::default(); // memory store, system clock: no runtime needed
    /// let rule = Rule::per_second(100)?;
    /// let key = Key::new("batch-job")?;
    /// for _ in 0..100 {
    ///     limiter.check_now(&key, &rule, 1)?;
    /// }
    /// // The 101st request waits about 10 ms for its turn.
    /// assert!(limiter.wait_blocking(&key, &rule, 1, Duration::from_secs(1))?.allowed);
    /// // One an hour: the next turn is an hour away, past `max_wait`, so it gives up at once.
    /// let hourly = Rule::gcra(1, Duration::from_secs(3600), 1)?;
    /// assert!(limiter.check_now(&key, &hourly, 1)?.allowed);
    /// let denied = limiter.wait_blocking(&key, &hourly, 1, Duration::from_secs(1))?;
    /// assert!(!denied.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn wait_blocking(
        &self,
        key: &Key,
        rule: &Rule,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, CheckError> {
        wait_blocking_on(&self.clock, max_wait, || self.check_now(key, rule, cost))
    }
}

/// A blocking wait of at most `max_wait` on `clock`: `check` until it allows, sleeping the
/// thread until each `retry_after` (and an allowed request's `delay`); gives up with the
/// denial when the next try would come too late. [`Limiter::wait_blocking`] and
/// [`DirectLimiter::wait_blocking`](crate::DirectLimiter::wait_blocking) are this.
pub(super) fn wait_blocking_on<C: Clock>(
    clock: &C,
    max_wait: Duration,
    mut check: impl FnMut() -> Result<Decision, CheckError>,
) -> Result<Decision, CheckError> {
    let wait = Wait::new(clock.now_ns(), max_wait);
    loop {
        let d = check()?;
        match wait.after(&d, clock.now_ns()) {
            WaitStep::Go | WaitStep::GiveUp => return Ok(d),
            WaitStep::GoAt(go_ns) => {
                clock.sleep_until_blocking(go_ns);
                return Ok(d);
            }
            WaitStep::RetryAt(retry_ns) => clock.sleep_until_blocking(retry_ns),
        }
    }
}
