//! Weir's GCRA against governor's: the same quota and the same arrival times must give the
//! same decisions and the same wait times.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock as _, FakeRelativeClock};
use governor::{Quota, RateLimiter};
use proptest::prelude::*;
use weir_core::{Key, MemoryStore, Op, Outcome, Rule};
use weir_testkit::T0_NS;

/// Rates that divide one second evenly, so both libraries have the same integer interval.
const RATES: [u32; 10] = [1, 2, 4, 5, 8, 10, 20, 50, 100, 1000];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn same_decisions_as_governor(
        rate in proptest::sample::select(RATES.to_vec()),
        burst in 1u32..=20,
        gaps in proptest::collection::vec(
            prop_oneof![Just(0u64), 0u64..2_000_000, 0u64..2_000_000_000],
            1..300,
        ),
        costs in proptest::collection::vec(1u32..=3, 300),
    ) {
        let quota = Quota::per_second(NonZeroU32::new(rate).unwrap())
            .allow_burst(NonZeroU32::new(burst).unwrap());
        let clock = FakeRelativeClock::default();
        let governor = RateLimiter::direct_with_clock(quota, clock.clone());

        let rule = Rule::gcra(u64::from(rate), Duration::from_secs(1), u64::from(burst)).unwrap();
        let store = MemoryStore::default();
        // 8 bytes: the memory store decides it on its lock-free path.
        let key = Key::from(0xD1FF_u64);
        let mut now = T0_NS;

        for (gap, cost) in gaps.iter().zip(&costs) {
            clock.advance(Duration::from_nanos(*gap));
            now += gap;
            let cost = (*cost).min(burst);
            let theirs = governor.check_n(NonZeroU32::new(cost).unwrap()).unwrap();
            let ours = match store.apply_now(&key, &rule, Op::Check { cost: u64::from(cost) }, now) {
                Ok(Outcome::Decision(d)) => d,
                other => panic!("{other:?}"),
            };
            prop_assert_eq!(theirs.is_ok(), ours.allowed, "at +{} ns, cost {}", now - T0_NS, cost);
            if let Err(not_until) = theirs {
                prop_assert_eq!(not_until.wait_time_from(clock.now()), ours.retry_after);
            }
        }
    }
}
