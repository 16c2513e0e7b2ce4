//! The keyless `DirectLimiter` against the reference model (the pure step on one record)
//! and, under GCRA, against governor's direct limiter: the same rule and the same arrival
//! times give the same decisions, field for field; and under contention it admits exactly
//! what the model admits sequentially.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::num::NonZeroU32;
use std::time::Duration;

use governor::clock::{Clock as _, FakeRelativeClock};
use governor::{Quota, RateLimiter};
use proptest::prelude::*;
use weir_core::{CheckError, Clock as _, DirectLimiter, Key, ManualClock, Op, Outcome, Rule};
use weir_testkit::{Model, T0_NS};

/// Rates that divide one second evenly, so governor has the same integer interval.
const RATES: [u32; 10] = [1, 2, 4, 5, 8, 10, 20, 50, 100, 1000];

fn gaps() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(
        prop_oneof![Just(0u64), 0u64..2_000_000, 0u64..2_000_000_000],
        1..300,
    )
}

/// The model's answer to a check of `cost` on its one key.
fn model_check(model: &mut Model, rule: &Rule, cost: u64, now: u64) -> Result<Outcome, CheckError> {
    model.apply(&Key::from(0u64), rule, Op::Check { cost }, now)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn gcra_decides_as_governor_and_the_model(
        rate in proptest::sample::select(RATES.to_vec()),
        burst in 1u32..=20,
        gaps in gaps(),
        costs in proptest::collection::vec(0u32..=3, 300),
    ) {
        let quota = Quota::per_second(NonZeroU32::new(rate).unwrap())
            .allow_burst(NonZeroU32::new(burst).unwrap());
        let gov_clock = FakeRelativeClock::default();
        let governor = RateLimiter::direct_with_clock(quota, gov_clock.clone());
        let rule = Rule::gcra(u64::from(rate), Duration::from_secs(1), u64::from(burst)).unwrap();
        let clock = ManualClock::new(T0_NS);
        let direct = DirectLimiter::with_clock(rule, clock.clone()).unwrap();
        let mut model = Model::new();

        for (gap, cost) in gaps.iter().zip(&costs) {
            gov_clock.advance(Duration::from_nanos(*gap));
            clock.advance(Duration::from_nanos(*gap));
            let now = clock.now_ns();
            let cost = (*cost).min(burst);
            let ours = direct.check_n_now(u64::from(cost)).unwrap();
            let reference = model_check(&mut model, &rule, u64::from(cost), now).unwrap();
            prop_assert_eq!(Outcome::Decision(ours), reference, "at +{} ns, cost {}", now - T0_NS, cost);
            if cost > 0 {
                let theirs = governor.check_n(NonZeroU32::new(cost).unwrap()).unwrap();
                prop_assert_eq!(theirs.is_ok(), ours.allowed, "at +{} ns, cost {}", now - T0_NS, cost);
                if let Err(not_until) = theirs {
                    prop_assert_eq!(not_until.wait_time_from(gov_clock.now()), ours.retry_after);
                }
            }
        }
    }

    #[test]
    fn token_bucket_and_fixed_window_decide_as_the_model(
        bucket in any::<bool>(),
        limit in 1u64..=20,
        period_ms in proptest::sample::select(vec![1u64, 7, 100, 1000, 60_000]),
        gaps in gaps(),
        costs in proptest::collection::vec(0u64..=3, 300),
    ) {
        let period = Duration::from_millis(period_ms);
        let rule = if bucket {
            Rule::token_bucket(limit, 3, period).unwrap()
        } else {
            Rule::fixed_window(limit, period).unwrap()
        };
        let clock = ManualClock::new(T0_NS);
        let direct = DirectLimiter::with_clock(rule, clock.clone()).unwrap();
        let mut model = Model::new();
        for (gap, cost) in gaps.iter().zip(&costs) {
            clock.advance(Duration::from_nanos(*gap));
            let now = clock.now_ns();
            let cost = (*cost).min(limit);
            let ours = direct.check_n_now(cost).unwrap();
            let reference = model_check(&mut model, &rule, cost, now).unwrap();
            prop_assert_eq!(Outcome::Decision(ours), reference, "at +{} ns, cost {}", now - T0_NS, cost);
        }
    }
}

/// Many threads on one direct limiter at a frozen instant admit exactly what the model
/// admits sequentially; then time moves and it holds again.
#[test]
fn contention_admits_exactly_what_the_model_admits() {
    for rule in weir_testkit::contention::one_word_rules() {
        let clock = ManualClock::new(T0_NS);
        let direct = DirectLimiter::with_clock(rule, clock.clone()).unwrap();
        weir_testkit::contention::admits_as_the_model(&rule, &clock, || {
            direct.check_now().unwrap().allowed
        });
    }
}
