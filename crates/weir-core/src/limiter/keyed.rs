//! The keyed limiter: one rule, a key of any `Hash + Eq` type per check (a user id, an
//! `IpAddr`, a `String` or a `&str` borrowed from one, a tuple), the embedded store. What
//! governor calls a keyed rate limiter (`RateLimiter::keyed`), synchronous and without a
//! runtime, with the same `check_now` shape as the [`DirectLimiter`](crate::DirectLimiter).
//!
//! Where this sits in a decision: [`KeyedLimiter::check_now`] reads `now` from its
//! [`Clock`] once and turns the key into its bytes (`limiter/key_bytes.rs`: what its `Hash`
//! writes). A key of 8 bytes or fewer (`u64`, `u32`, `IpAddr::V4`, a short string) is one
//! word, and under a rule whose state is one word the store's lock-free table decides it
//! with that word (`MemoryStore::check_lock_free_u64`), the rule's meter made once at
//! construction and the cost validated by the caller, so no [`Key`](crate::Key) is built
//! and nothing is derived again per check; a longer key, a key that table does not hold,
//! and any other rule take the store's usual path. For a `u64` key `k` the record is the
//! one a [`Limiter`](crate::Limiter) over the same store uses for `Key::from(k)` under the
//! same rule: the same step, the same decisions (the conformance suite and a differential
//! test compare).

use std::borrow::Borrow;
use std::hash::Hash;
use std::marker::PhantomData;
use std::time::Duration;

use super::decision;
use super::key_bytes::KeyBytes;
use super::sync::wait_blocking_on;
use crate::clock::{Clock, SystemClock};
use crate::decision::Decision;
use crate::error::{CheckError, RuleError};
use crate::rule::{Algorithm, Rule};
use crate::step::{validate, Op};
use crate::store::{MemoryStore, WordMeter};

/// A limiter for one rule and keys of type `K`, over its own [`MemoryStore`]: every key has
/// its own budget, decided synchronously. `K` is any `Hash + Eq` type, as for governor's
/// keyed limiter; the verbs take a `&Q` that `K` borrows as (`&str` for `String`), as a
/// `HashMap` lookup does. Under GCRA, a token bucket that starts full or a fixed window (no
/// lockout), a key of 8 bytes or fewer (`u64`, `u32`, `IpAddr::V4`, …) is checked by one
/// lock-free step on its 16-byte slot; longer keys (a string, an `IpAddr::V6`) and any
/// other rule work too, through the store's locked path.
///
/// Two keys get two budgets when their `Hash` writes different bytes (every std type's
/// does); keys longer than [`Key::MAX_LEN`](crate::Key::MAX_LEN) bytes are refused
/// ([`CheckError::Key`]). Its decisions are exactly those of a
/// [`Limiter`](crate::Limiter) over a memory store checking the key's bytes under the same
/// rule (`Key::from(k)` for a `u64` key `k`), and under GCRA exactly governor's keyed
/// limiter's. Memory stays bounded by the store's capacity (unlimited keys are evicted,
/// least recently used first; limited ones never are).
///
/// ```
/// use std::net::IpAddr;
/// use std::time::Duration;
/// use weir_core::{KeyedLimiter, ManualClock, Rule};
///
/// let clock = ManualClock::new(0);
/// // Each user 2 per second, as a burst of 2.
/// let per_user: KeyedLimiter<u64, _> =
///     KeyedLimiter::with_clock(Rule::per_second(2)?, clock.clone())?;
/// let (alice, bob) = (17, 42);
/// assert!(per_user.check_now(&alice)?.allowed);
/// assert!(per_user.check_now(&alice)?.allowed);
/// let denied = per_user.check_now(&alice)?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Duration::from_millis(500));
/// assert!(per_user.check_now(&bob)?.allowed, "bob has a budget of his own");
///
/// clock.advance(Duration::from_millis(500));
/// assert!(per_user.check_now(&alice)?.allowed);
///
/// // Any key governor takes: addresses, strings (checked as `&str`), tuples.
/// let per_ip: KeyedLimiter<IpAddr> = KeyedLimiter::new(Rule::per_second(10)?)?;
/// assert!(per_ip.check_now(&"192.0.2.7".parse::<IpAddr>()?)?.allowed);
/// let per_tenant: KeyedLimiter<String> = KeyedLimiter::new(Rule::per_second(10)?)?;
/// assert_eq!(per_tenant.check_now("acme")?.remaining, 9);
/// let per_route: KeyedLimiter<(String, u16)> = KeyedLimiter::new(Rule::per_second(10)?)?;
/// assert!(per_route.check_now(&("/search".to_string(), 443))?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Share it across threads by reference or in an `Arc`. [`KeyedLimiter::new`] reads the
/// [`SystemClock`] and holds up to the default store's capacity of keys (1 048 576);
/// [`with_store`](Self::with_store) takes a store of any capacity.
pub struct KeyedLimiter<K: ?Sized, C = SystemClock> {
    store: MemoryStore,
    rule: Rule,
    /// The rule's one-word meter, if its state is one word: the lock-free way.
    meter: Option<WordMeter>,
    clock: C,
    /// The key type, only checked against (a limiter holds no key of its own).
    keys: PhantomData<fn(&K)>,
}

impl<K: ?Sized, C: std::fmt::Debug> std::fmt::Debug for KeyedLimiter<K, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyedLimiter")
            .field("rule", &self.rule)
            .field("clock", &self.clock)
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq + ?Sized> KeyedLimiter<K> {
    /// A limiter for `rule` on the system clock and a memory store of its own holding up to
    /// 1 048 576 keys (the default capacity, all of it for this rule). Refuses a concurrency
    /// rule (see [`with_store`](Self::with_store)).
    pub fn new(rule: Rule) -> Result<Self, RuleError> {
        Self::with_clock(rule, SystemClock::new())
    }
}

impl<K: Hash + Eq + ?Sized, C: Clock> KeyedLimiter<K, C> {
    /// A limiter for `rule` on a memory store of its own (as [`new`](KeyedLimiter::new)),
    /// reading time from `clock`.
    pub fn with_clock(rule: Rule, clock: C) -> Result<Self, RuleError> {
        // One rule: the whole capacity is its share (a shared store keeps half per rule).
        Self::with_store(rule, MemoryStore::builder().rule_share(100).build(), clock)
    }

    /// A limiter for `rule` over `store` (its capacity, times its rule share, bounds the keys
    /// held: build it with [`MemoryStore::builder`], with `rule_share(100)` unless other
    /// rules share it), reading time from `clock`. The store may be shared with a
    /// [`Limiter`](crate::Limiter): a `u64` key `k` here is `Key::from(k)` there.
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
            keys: PhantomData,
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

    /// Checks a request of cost 1 for `key` now and consumes it if allowed: the same shape
    /// as [`DirectLimiter::check_now`](crate::DirectLimiter::check_now) (a denial is an
    /// `Ok` decision). Fails only when the store is full of limited keys and cannot take a
    /// new one ([`StoreError::Full`](crate::StoreError::Full): refuse the request, as the
    /// store protects the budgets it holds), or for a key longer than
    /// [`Key::MAX_LEN`](crate::Key::MAX_LEN).
    #[inline]
    pub fn check_now<Q>(&self, key: &Q) -> Result<Decision, CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.decide(key, 1)
    }

    /// Checks a request of `cost` units for `key` now and consumes them if allowed (`cost ==
    /// 0` is a peek). A cost above the rule's limit is [`CheckError::CostAboveCapacity`].
    #[inline]
    pub fn check_n_now<Q>(&self, key: &Q, cost: u64) -> Result<Decision, CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        validate(&self.rule, &Op::Check { cost })?;
        self.decide(key, cost)
    }

    /// Whether a request of cost 1 for `key` would pass now, consuming nothing.
    pub fn peek_now<Q>(&self, key: &Q) -> Result<Decision, CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.decide(key, 0)
    }

    /// Forgets `key`'s usage: it is as new.
    pub fn reset<Q>(&self, key: &Q) -> Result<(), CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let now_ns = self.clock.now_ns();
        self.store
            .apply_scoped_now(&KeyBytes::of(key).key()?, &self.rule, Op::Reset, now_ns)
            .map(drop)
    }

    /// Waits until a request of `cost` for `key` is allowed, then consumes it, blocking the
    /// calling thread ([`Clock::sleep_until_blocking`]: it sleeps, never spins); gives up
    /// (returning the denial) when that would take longer than `max_wait`. Never call it
    /// from async code.
    pub fn wait_blocking<Q>(
        &self,
        key: &Q,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Decision, CheckError>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        wait_blocking_on(&self.clock, max_wait, || self.check_n_now(key, cost))
    }

    #[inline(always)]
    fn decide<Q: Hash + ?Sized>(&self, key: &Q, cost: u64) -> Result<Decision, CheckError> {
        let now_ns = self.clock.now_ns();
        match KeyBytes::of(key) {
            KeyBytes::Word(word) => {
                let decided = self.meter.as_ref().and_then(|meter| {
                    self.store
                        .check_lock_free_u64(&self.rule, meter, word, cost, now_ns)
                });
                match decided {
                    Some(decision) => Ok(decision),
                    None => self.decide_slowly(&KeyBytes::Word(word), cost, now_ns),
                }
            }
            long => self.decide_slowly(&long, cost, now_ns),
        }
    }

    /// [`decide`](Self::decide) off the lock-free table (a new key, a key the general
    /// table holds, a key longer than a word, a rule of more than one word): the store's
    /// usual path, the same record.
    #[cold]
    #[inline(never)]
    fn decide_slowly(
        &self,
        key: &KeyBytes,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decision, CheckError> {
        let op = Op::Check { cost };
        decision(
            self.store
                .apply_scoped_now(&key.key()?, &self.rule, op, now_ns)?,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;
    use crate::key::Key;
    use crate::limiter::Limiter;

    #[test]
    fn refuses_concurrency_and_takes_every_other_rule() {
        let s = Duration::from_secs(1);
        assert!(KeyedLimiter::<u64>::new(Rule::concurrency(5).unwrap()).is_err());
        for rule in [
            Rule::per_second(5).unwrap(),
            Rule::sliding_log(5, s).unwrap(),
            Rule::fixed_window(5, s).unwrap(),
            Rule::leaky_bucket(5, 5, s).unwrap(),
        ] {
            assert!(KeyedLimiter::<u64>::new(rule).is_ok());
        }
    }

    #[test]
    fn costs_peeks_reset_and_keys_apart() {
        let clock = ManualClock::new(1_000_000_000);
        let limiter: KeyedLimiter<u64, _> = KeyedLimiter::with_clock(
            Rule::fixed_window(3, Duration::from_secs(1)).unwrap(),
            clock,
        )
        .unwrap();
        assert!(matches!(
            limiter.check_n_now(&7, 4),
            Err(CheckError::CostAboveCapacity {
                cost: 4,
                capacity: 3
            })
        ));
        assert!(limiter.check_n_now(&7, 2).unwrap().allowed);
        assert_eq!(limiter.peek_now(&7).unwrap().remaining, 1);
        assert!(!limiter.check_n_now(&7, 2).unwrap().allowed);
        assert_eq!(limiter.peek_now(&8).unwrap().remaining, 3, "another key");
        limiter.reset(&7).unwrap();
        assert_eq!(limiter.peek_now(&7).unwrap().remaining, 3);
    }

    /// The key `k` here is `Key::from(k)` for a `Limiter` over the same store: one budget.
    #[test]
    fn shares_records_with_a_limiter_over_the_same_store() {
        let clock = ManualClock::new(1_000_000_000);
        let rule = Rule::per_second(2).unwrap();
        let store = MemoryStore::default();
        let limiter = Limiter::new(store.clone(), clock.clone());
        let keyed: KeyedLimiter<u64, _> = KeyedLimiter::with_store(rule, store, clock).unwrap();
        assert!(keyed.check_now(&99).unwrap().allowed);
        assert!(
            limiter
                .check_now(&Key::from(99u64), &rule, 1)
                .unwrap()
                .allowed
        );
        assert!(!keyed.check_now(&99).unwrap().allowed);
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
        let limiter: KeyedLimiter<u64, _> =
            KeyedLimiter::with_store(Rule::per_second(1).unwrap(), store, clock).unwrap();
        for key in 0..64 {
            assert!(limiter.check_now(&key).unwrap().allowed, "key {key}");
        }
        assert_eq!(limiter.store().stats().len, 64);
        // `new`: the default capacity, all of it for the rule (its lock-free table is sized
        // for every record, not half of them).
        let default: KeyedLimiter<u64> = KeyedLimiter::new(Rule::per_second(1).unwrap()).unwrap();
        assert!(default.check_now(&1).unwrap().allowed);
        assert_eq!(default.store().capacity(), 1_048_576);
        assert_eq!(default.store().stats().lock_free_records, 1_048_576);
    }

    #[test]
    fn wait_blocking_sleeps_until_retry_after() {
        let clock = ManualClock::new(1_000_000_000);
        let limiter: KeyedLimiter<u64, _> =
            KeyedLimiter::with_clock(Rule::per_second(1).unwrap(), clock.clone()).unwrap();
        assert!(limiter.check_now(&5).unwrap().allowed);
        let gave_up = limiter
            .wait_blocking(&5, 1, Duration::from_millis(999))
            .unwrap();
        assert!(!gave_up.allowed, "a wait of 1 s does not fit in 999 ms");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| limiter.wait_blocking(&5, 1, Duration::from_secs(2)));
            while clock.sleepers() == 0 {
                std::thread::yield_now();
            }
            clock.advance(Duration::from_secs(1));
            assert!(waiter.join().unwrap().unwrap().allowed);
        });
    }

    /// Keys of other types: strings checked through `&str`, addresses, tuples; each its own
    /// budget, short ones through the lock-free table, long ones through the store.
    #[test]
    fn keys_of_any_hash_type_get_budgets_of_their_own() {
        use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
        let clock = ManualClock::new(1_000_000_000);
        let rule = Rule::per_second(1).unwrap();
        let tenants: KeyedLimiter<String, _> =
            KeyedLimiter::with_clock(rule, clock.clone()).unwrap();
        for tenant in ["acme", "a tenant with a long name"] {
            assert!(tenants.check_now(tenant).unwrap().allowed);
            assert!(
                !tenants.check_now(&tenant.to_string()).unwrap().allowed,
                "{tenant}"
            );
        }
        assert!(tenants.check_now("acme2").unwrap().allowed);
        assert_eq!(tenants.store().stats().len, 3);

        let ips: KeyedLimiter<IpAddr, _> = KeyedLimiter::with_clock(rule, clock.clone()).unwrap();
        let v4 = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        for ip in [v4, v6] {
            assert!(ips.check_now(&ip).unwrap().allowed);
            assert!(!ips.check_now(&ip).unwrap().allowed);
        }
        assert_eq!(
            ips.store().lock_free_len(clock.now_ns()),
            2,
            "v4 in a word, v6 as a 16-byte string key: both lock-free"
        );

        let pairs: KeyedLimiter<(u32, u32), _> = KeyedLimiter::with_clock(rule, clock).unwrap();
        assert!(pairs.check_now(&(1, 2)).unwrap().allowed);
        assert!(pairs.check_now(&(2, 1)).unwrap().allowed);
        assert!(!pairs.check_now(&(1, 2)).unwrap().allowed);
    }

    /// A key longer than a store key may be is refused with an error, never let through.
    #[test]
    fn a_key_too_long_is_an_error_not_an_allowance() {
        let limiter: KeyedLimiter<String> =
            KeyedLimiter::new(Rule::per_second(1).unwrap()).unwrap();
        let long = "x".repeat(Key::MAX_LEN + 1);
        assert!(matches!(
            limiter.check_now(long.as_str()),
            Err(CheckError::Key(_))
        ));
    }
}
