//! The `KeyedLimiter` (one rule, `u64` keys and others, its own memory store) against the
//! reference model (the pure step, one record per key) and, under GCRA, against governor's
//! keyed limiter (`u64`, `String` and `IpAddr` keys): the same rule, keys and arrival times give the same decisions, field for field,
//! on the lock-free path and off it (rules of more than one word, keys evicted or moved to
//! the general path); and under contention on one key it admits exactly what the model
//! admits sequentially.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock as _, FakeRelativeClock};
use governor::{Quota, RateLimiter};
use proptest::prelude::*;
use weir_core::{
    Clock as _, Key, KeyedLimiter, ManualClock, MemoryStore, Op, Outcome, Rule, SystemClock,
};
use weir_testkit::{Model, T0_NS};

/// Rates that divide one second evenly, so governor has the same integer interval.
const RATES: [u32; 10] = [1, 2, 4, 5, 8, 10, 20, 50, 100, 1000];

/// (gap in ns before the check, key index, cost).
fn steps() -> impl Strategy<Value = Vec<(u64, usize, u32)>> {
    proptest::collection::vec(
        (
            prop_oneof![Just(0u64), 0u64..2_000_000, 0u64..2_000_000_000],
            0usize..6,
            0u32..=3,
        ),
        1..300,
    )
}

/// Six keys: small ones, and the extremes of the range.
const KEYS: [u64; 6] = [0, 1, 2, 0xFFFF_FFFF, u64::MAX - 1, u64::MAX];

/// `rate` a second with a burst of `burst`, for governor and for Weir, and their two clocks
/// (advanced together by each test).
fn gcra(rate: u32, burst: u32) -> (Quota, Rule, FakeRelativeClock, ManualClock) {
    let quota = Quota::per_second(NonZeroU32::new(rate).unwrap())
        .allow_burst(NonZeroU32::new(burst).unwrap());
    let rule = Rule::gcra(u64::from(rate), Duration::from_secs(1), u64::from(burst)).unwrap();
    (
        quota,
        rule,
        FakeRelativeClock::default(),
        ManualClock::new(T0_NS),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn gcra_decides_as_governor_and_the_model(
        rate in proptest::sample::select(RATES.to_vec()),
        burst in 1u32..=20,
        steps in steps(),
    ) {
        let (quota, rule, gov_clock, clock) = gcra(rate, burst);
        let governor = RateLimiter::dashmap_with_clock(quota, gov_clock.clone());
        let keyed: KeyedLimiter<u64, _> = KeyedLimiter::with_clock(rule, clock.clone()).unwrap();
        let mut model = Model::new();

        for (gap, key, cost) in &steps {
            gov_clock.advance(Duration::from_nanos(*gap));
            clock.advance(Duration::from_nanos(*gap));
            let now = clock.now_ns();
            let (key, cost) = (KEYS[*key], (*cost).min(burst));
            let ours = keyed.check_n_now(&key, u64::from(cost)).unwrap();
            let reference = model
                .apply(&Key::from(key), &rule, Op::Check { cost: u64::from(cost) }, now)
                .unwrap();
            prop_assert_eq!(Outcome::Decision(ours), reference, "key {} at +{} ns, cost {}", key, now - T0_NS, cost);
            if cost > 0 {
                let theirs = governor.check_key_n(&key, NonZeroU32::new(cost).unwrap()).unwrap();
                prop_assert_eq!(theirs.is_ok(), ours.allowed, "key {} at +{} ns, cost {}", key, now - T0_NS, cost);
                if let Err(not_until) = theirs {
                    prop_assert_eq!(not_until.wait_time_from(gov_clock.now()), ours.retry_after);
                }
            }
        }
    }

    /// Keys of other types, as governor takes them: strings (short ones fit the lock-free
    /// word, long ones take the store's path) and IP addresses (v4 in a word, v6 not). Under
    /// GCRA every admission and wait equals governor's keyed limiter's over the same keys.
    #[test]
    fn string_and_address_keys_decide_as_governor(
        rate in proptest::sample::select(RATES.to_vec()),
        burst in 1u32..=20,
        steps in steps(),
    ) {
        let (quota, rule, gov_clock, clock) = gcra(rate, burst);
        let gov_names = RateLimiter::dashmap_with_clock(quota, gov_clock.clone());
        let gov_ips = RateLimiter::dashmap_with_clock(quota, gov_clock.clone());
        let names: KeyedLimiter<String, _> = KeyedLimiter::with_clock(rule, clock.clone()).unwrap();
        let ips: KeyedLimiter<IpAddr, _> = KeyedLimiter::with_clock(rule, clock.clone()).unwrap();
        let name_keys = ["", "a", "alice", "tenant:7", "a name longer than one word", "a name longer than one word!"];
        let ip_keys: [IpAddr; 6] = [
            [10, 0, 0, 1].into(), [10, 0, 0, 2].into(), [0, 0, 0, 0].into(),
            std::net::Ipv6Addr::LOCALHOST.into(), std::net::Ipv6Addr::UNSPECIFIED.into(),
            [0xfe80, 0, 0, 0, 0, 0, 0, 1].into(),
        ];
        for (gap, key, cost) in &steps {
            gov_clock.advance(Duration::from_nanos(*gap));
            clock.advance(Duration::from_nanos(*gap));
            let cost = (*cost).clamp(1, burst);
            let n = NonZeroU32::new(cost).unwrap();
            let name = name_keys[*key].to_string();
            let ours = names.check_n_now(name.as_str(), u64::from(cost)).unwrap();
            let theirs = gov_names.check_key_n(&name, n).unwrap();
            prop_assert_eq!(theirs.is_ok(), ours.allowed, "name {:?}", name);
            if let Err(not_until) = theirs {
                prop_assert_eq!(not_until.wait_time_from(gov_clock.now()), ours.retry_after);
            }
            let ip = ip_keys[*key];
            let ours = ips.check_n_now(&ip, u64::from(cost)).unwrap();
            let theirs = gov_ips.check_key_n(&ip, n).unwrap();
            prop_assert_eq!(theirs.is_ok(), ours.allowed, "ip {}", ip);
            if let Err(not_until) = theirs {
                prop_assert_eq!(not_until.wait_time_from(gov_clock.now()), ours.retry_after);
            }
        }
    }

    /// Every other kind of rule too, one word (the lock-free path) or not (the store's
    /// locked path): the model still agrees. (A store too small for the keys would evict
    /// unlimited ones, forgetting their usage by design; the store's own tests cover that.)
    #[test]
    fn every_rule_decides_as_the_model(
        kind in 0usize..5,
        limit in 1u64..=20,
        period_ms in proptest::sample::select(vec![1u64, 7, 100, 1000, 60_000]),
        steps in steps(),
    ) {
        let period = Duration::from_millis(period_ms);
        let rule = match kind {
            0 => Rule::token_bucket(limit, 3, period).unwrap(),
            1 => Rule::fixed_window(limit, period).unwrap(),
            2 => Rule::sliding_log(limit, period).unwrap(),
            3 => Rule::leaky_bucket(limit, 3, period).unwrap(),
            _ => Rule::gcra(3, period, limit).unwrap(),
        };
        let clock = ManualClock::new(T0_NS);
        let keyed: KeyedLimiter<u64, _> =
            KeyedLimiter::with_store(rule, MemoryStore::default(), clock.clone()).unwrap();
        let mut model = Model::new();
        for (gap, key, cost) in &steps {
            clock.advance(Duration::from_nanos(*gap));
            let now = clock.now_ns();
            let (key, cost) = (KEYS[*key], u64::from(*cost).min(limit));
            let ours = keyed.check_n_now(&key, cost).unwrap();
            let reference = model.apply(&Key::from(key), &rule, Op::Check { cost }, now).unwrap();
            prop_assert_eq!(
                Outcome::Decision(ours), reference, "key {} at +{} ns, cost {}", key, now - T0_NS, cost
            );
        }
    }
}

/// Many threads on one key at a frozen instant admit exactly what the model admits
/// sequentially; then time moves and it holds again. The lock-free path under contention.
#[test]
fn contention_on_one_key_admits_exactly_what_the_model_admits() {
    for rule in weir_testkit::contention::one_word_rules() {
        let clock = ManualClock::new(T0_NS);
        let keyed: KeyedLimiter<u64, _> = KeyedLimiter::with_clock(rule, clock.clone()).unwrap();
        weir_testkit::contention::admits_as_the_model(&rule, &clock, || {
            keyed.check_now(&42).unwrap().allowed
        });
    }
}

/// The system clock's limiter works without a runtime (what `KeyedLimiter::new` gives).
#[test]
fn new_runs_on_the_system_clock_without_a_runtime() {
    let keyed: KeyedLimiter<u64, SystemClock> =
        KeyedLimiter::new(Rule::per_second(2).unwrap()).unwrap();
    assert!(keyed.check_now(&1).unwrap().allowed);
    assert!(keyed.check_now(&1).unwrap().allowed);
    assert!(!keyed.check_now(&1).unwrap().allowed);
    assert!(keyed.check_now(&2).unwrap().allowed);
}
