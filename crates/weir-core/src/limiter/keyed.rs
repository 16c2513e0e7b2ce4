//! The keyed limiter for integer keys: one rule, a `u64` key per check (a user or tenant
//! id, a hashed token, a packed IPv4 address), the embedded store. What governor calls a
//! keyed rate limiter (`RateLimiter::keyed`), synchronous and without a runtime.
//!
//! Where this sits in a decision: [`KeyedLimiter::check_now`] reads `now` from its
//! [`Clock`] once and asks its [`MemoryStore`] for the record of (rule, `Key::from(key)`)
//! (`MemoryStore::check_lock_free_u64`): under a rule whose state is one word, the lock-free
//! table decides it with the key's 8 bytes, the rule's meter made once at construction and
//! the cost validated by the caller, so no [`Key`](crate::Key) is built and nothing is
//! derived again per check; a key that table does not hold, and any other rule, take the
//! store's usual path. The record is the one a [`Limiter`](crate::Limiter) over the same
//! store would use for `Key::from(key)` under the same rule: the same step, the same
//! decisions (the conformance suite and a differential test compare).

use std::time::Duration;

use super::decision;
use super::sync::wait_blocking_on;
use crate::clock::{Clock, SystemClock};
use crate::decision::Decision;
use crate::error::{CheckError, RuleError};
use crate::key::Key;
use crate::rule::{Algorithm, Rule};
use crate::step::{validate, Op};
use crate::store::{MemoryStore, WordMeter};

/// A limiter for one rule and integer keys, over its own [`MemoryStore`]: every key has its
/// own budget, decided synchronously. Under GCRA, a token bucket that starts full or a
/// fixed window (no lockout), a check is one lock-free step on the key's 16-byte slot; any
/// other rule works too, through the store's locked path.
///
/// Its decisions are exactly those of a [`Limiter`](crate::Limiter) over a memory store
/// checking `Key::from(key)` under the same rule, and under GCRA exactly governor's keyed
/// limiter's. Memory stays bounded by the store's capacity (unlimited keys are evicted,
/// least recently used first; limited ones never are).
///
/// ```
/// use std::time::Duration;
/// use weir_core::{KeyedLimiter, ManualClock, Rule};
///
/// let clock = ManualClock::new(0);
/// // Each user 2 per second, as a burst of 2.
/// let per_user = KeyedLimiter::with_clock(Rule::per_second(2)?, clock.clone())?;
/// let (alice, bob) = (17_u64, 42_u64);
/// assert!(per_user.check_now(alice)?.allowed);
/// assert!(per_user.check_now(alice)?.allowed);
/// let denied = per_user.check_now(alice)?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Duration::from_millis(500));
/// assert!(per_user.check_now(bob)?.allowed, "bob has a budget of his own");
///
/// clock.advance(Duration::from_millis(500));
/// assert!(per_user.check_now(alice)?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Share it across threads by reference or in an `Arc`. [`KeyedLimiter::new`] reads the
/// [`SystemClock`] and holds up to the default store's capacity of keys (1 048 576);
/// [`with_store`](Self::with_store) takes a store of any capacity.
#[derive(Debug)]
pub struct KeyedLimiter<C = SystemClock> {
    store: MemoryStore,
    rule: Rule,
    /// The rule's one-word meter, if its state is one word: the lock-free way.
    meter: Option<WordMeter>,
    clock: C,
}

impl KeyedLimiter {
    /// A limiter for `rule` on the system clock and a memory store of its own holding up to
    /// 1 048 576 keys (the default capacity, all of it for this rule). Refuses a concurrency
    /// rule (see [`with_store`](Self::with_store)).
    pub fn new(rule: Rule) -> Result<Self, RuleError> {
        Self::with_clock(rule, SystemClock::new())
    }
}

impl<C: Clock> KeyedLimiter<C> {
    /// A limiter for `rule` on a memory store of its own (as [`new`](KeyedLimiter::new)),
    /// reading time from `clock`.
    pub fn with_clock(rule: Rule, clock: C) -> Result<Self, RuleError> {
        // One rule: the whole capacity is its share (a shared store keeps half per rule).
        Self::with_store(rule, MemoryStore::builder().rule_share(100).build(), clock)
    }

    /// A limiter for `rule` over `store` (its capacity, times its rule share, bounds the keys
    /// held: build it with [`MemoryStore::builder`], with `rule_share(100)` unless other
    /// rules share it), reading time from `clock`. The store may be shared with a
    /// [`Limiter`](crate::Limiter): the key `k` here is `Key::from(k)` there.
    /// `Err(RuleError::Inconsistent)` for a concurrency rule, whose leases are acquired
    /// and released, not checked (a [`Limiter`](crate::Limiter) has those verbs).
    pub fn with_store(rule: Rule, store: MemoryStore, clock: C) -> Result<Self, RuleError> {
        if matches!(rule.algorithm(), Algorithm::Concurrency(_)) {
            return Err(RuleError::Inconsistent {
                param: "algorithm",
                reason: "a keyed limiter checks requests; concurrency leases are acquired and \
                         released through a Limiter",
            });
        }
        Ok(Self {
            meter: WordMeter::of(&rule),
            store,
            rule,
            clock,
        })
    }

    /// The rule.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// The store (its [`stats`](MemoryStore::stats): records held, evictions, refusals).
    pub fn store(&self) -> &MemoryStore {
        &self.store
    }

    /// Checks a request of cost 1 for `key` now and consumes it if allowed. Fails only when
    /// the store is full of limited keys and cannot take a new one
    /// ([`StoreError::Full`](crate::StoreError::Full): refuse the request, as the store
    /// protects the budgets it holds).
    #[inline]
    pub fn check_now(&self, key: u64) -> Result<Decision, CheckError> {
        self.decide(key, 1)
    }

    /// Checks a request of `cost` units for `key` now and consumes them if allowed (`cost ==
    /// 0` is a peek). A cost above the rule's limit is [`CheckError::CostAboveCapacity`].
    #[inline]
    pub fn check_n_now(&self, key: u64, cost: u64) -> Result<Decision, CheckError> {
        validate(&self.rule, &Op::Check { cost })?;
        self.decide(key, cost)
    }

    /// Whether a request of cost 1 for `key` would pass now, consuming nothing.
    pub fn peek_now(&self, key: u64) -> Result<Decision, CheckError> {
        self.decide(key, 0)
    }

    /// Forgets `key`'s usage: it is as new.
    pub fn reset(&self, key: u64) -> Result<(), CheckError> {
        let now_ns = self.clock.now_ns();
        self.store
            .apply_scoped_now(&Key::from(key), &self.rule, Op::Reset, now_ns)
            .map(drop)
    }

    /// Waits until a request of `cost` for `key` is allowed, then consumes it, blocking the
    /// calling thread ([`Clock::sleep_until_blocking`]: it sleeps, never spins); gives up
    /// (returning the denial) when that would take longer than `max_wait`. Never call it
    /// from async code.
    pub fn wait_blocking(
        &self,
        key: u64,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, CheckError> {
        wait_blocking_on(&self.clock, max_wait, || self.check_n_now(key, cost))
    }

    #[inline(always)]
    fn decide(&self, key: u64, cost: u64) -> Result<Decision, CheckError> {
        let now_ns = self.clock.now_ns();
        let decided = self.meter.as_ref().and_then(|meter| {
            self.store
                .check_lock_free_u64(&self.rule, meter, key, cost, now_ns)
        });
        match decided {
            Some(decision) => Ok(decision),
            None => self.decide_slowly(key, cost, now_ns),
        }
    }

    /// [`decide`](Self::decide) off the lock-free table (a new key, a key the general
    /// table holds, a rule of more than one word): the store's usual path, the same record.
    #[cold]
    #[inline(never)]
    fn decide_slowly(&self, key: u64, cost: u64, now_ns: u64) -> Result<Decision, CheckError> {
        let op = Op::Check { cost };
        decision(
            self.store
                .apply_scoped_now(&Key::from(key), &self.rule, op, now_ns)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::limiter::Limiter;

    #[test]
    fn refuses_concurrency_and_takes_every_other_rule() {
        let s = Duration::from_secs(1);
        assert!(KeyedLimiter::new(Rule::concurrency(5).unwrap()).is_err());
        for rule in [
            Rule::per_second(5).unwrap(),
            Rule::sliding_log(5, s).unwrap(),
            Rule::fixed_window(5, s).unwrap(),
            Rule::leaky_bucket(5, 5, s).unwrap(),
        ] {
            assert!(KeyedLimiter::new(rule).is_ok());
        }
    }

    #[test]
    fn costs_peeks_reset_and_keys_apart() {
        let clock = ManualClock::new(1_000_000_000);
        let limiter = KeyedLimiter::with_clock(
            Rule::fixed_window(3, Duration::from_secs(1)).unwrap(),
            clock,
        )
        .unwrap();
        assert!(matches!(
            limiter.check_n_now(7, 4),
            Err(CheckError::CostAboveCapacity {
                cost: 4,
                capacity: 3
            })
        ));
        assert!(limiter.check_n_now(7, 2).unwrap().allowed);
        assert_eq!(limiter.peek_now(7).unwrap().remaining, 1);
        assert!(!limiter.check_n_now(7, 2).unwrap().allowed);
        assert_eq!(limiter.peek_now(8).unwrap().remaining, 3, "another key");
        limiter.reset(7).unwrap();
        assert_eq!(limiter.peek_now(7).unwrap().remaining, 3);
    }

    /// The key `k` here is `Key::from(k)` for a `Limiter` over the same store: one budget.
    #[test]
    fn shares_records_with_a_limiter_over_the_same_store() {
        let clock = ManualClock::new(1_000_000_000);
        let rule = Rule::per_second(2).unwrap();
        let store = MemoryStore::default();
        let limiter = Limiter::new(store.clone(), clock.clone());
        let keyed = KeyedLimiter::with_store(rule, store, clock).unwrap();
        assert!(keyed.check_now(99).unwrap().allowed);
        assert!(
            limiter
                .check_now(&Key::from(99u64), &rule, 1)
                .unwrap()
                .allowed
        );
        assert!(!keyed.check_now(99).unwrap().allowed);
    }

    /// Its own store: the rule's share is the whole capacity.
    #[test]
    fn its_own_store_gives_the_rule_the_whole_capacity() {
        let clock = ManualClock::new(1_000_000_000);
        let store = MemoryStore::builder()
            .capacity(64)
            .shards(1)
            .rule_share(100)
            .build();
        let limiter = KeyedLimiter::with_store(Rule::per_second(1).unwrap(), store, clock).unwrap();
        for key in 0..64 {
            assert!(limiter.check_now(key).unwrap().allowed, "key {key}");
        }
        assert_eq!(limiter.store().stats().len, 64);
        // `new`: the default capacity, all of it for the rule (its lock-free table is sized
        // for every record, not half of them).
        let default = KeyedLimiter::new(Rule::per_second(1).unwrap()).unwrap();
        assert!(default.check_now(1).unwrap().allowed);
        assert_eq!(default.store().capacity(), 1_048_576);
        assert_eq!(default.store().stats().lock_free_records, 1_048_576);
    }

    #[test]
    fn wait_blocking_sleeps_until_retry_after() {
        let clock = ManualClock::new(1_000_000_000);
        let limiter =
            KeyedLimiter::with_clock(Rule::per_second(1).unwrap(), clock.clone()).unwrap();
        assert!(limiter.check_now(5).unwrap().allowed);
        let gave_up = limiter
            .wait_blocking(5, 1, Duration::from_millis(999))
            .unwrap();
        assert!(!gave_up.allowed, "a wait of 1 s does not fit in 999 ms");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| limiter.wait_blocking(5, 1, Duration::from_secs(2)));
            while clock.sleepers() == 0 {
                std::thread::yield_now();
            }
            clock.advance(Duration::from_secs(1));
            assert!(waiter.join().unwrap().unwrap().allowed);
        });
    }
}
