//! Property tests on the pure step (through the reference model), with shrinking: every
//! algorithm keeps its written promise, `retry_after` is exact, peeks and errors change
//! nothing, and a rule change mid-stream never breaks a key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use proptest::prelude::*;
use weir_core::{Algorithm, Decision, Key, Op, Outcome, Rule};
use weir_testkit::invariants::{self, Checked};
use weir_testkit::strategy::{self, Action};
use weir_testkit::{Model, T0_NS};

fn key(k: u8) -> Key {
    Key::new(format!("k{k}")).unwrap()
}

fn decision(o: Result<Outcome, weir_core::CheckError>) -> Decision {
    match o {
        Ok(Outcome::Decision(d)) => d,
        other => panic!("{other:?}"),
    }
}

fn is_meter_or_fixed(rule: &Rule) -> bool {
    matches!(
        rule.algorithm(),
        Algorithm::FixedWindow(_)
            | Algorithm::Gcra(_)
            | Algorithm::TokenBucket(_)
            | Algorithm::LeakyBucket(_)
    )
}

/// Runs `actions` on the model: every `retry_after` exact, every trace within the rule's
/// promise (a warm-up rule's ramp included).
fn keeps_its_promise(rule: &Rule, actions: &[Action]) -> Result<(), TestCaseError> {
    let rule = *rule;
    let mut model = Model::new();
    let mut traces: Vec<Vec<Checked>> = vec![Vec::new(); usize::from(strategy::KEYS)];
    let mut now = T0_NS;
    for action in actions {
        match *action {
            Action::Advance(ns) => now += ns,
            Action::Check { key: k, cost } => {
                let d = decision(model.apply(&key(k), &rule, Op::Check { cost }, now));
                if !d.allowed {
                    let retry = u64::try_from(d.retry_after.as_nanos()).unwrap();
                    prop_assert!(retry > 0);
                    let mut before = model.clone();
                    let early =
                        decision(before.apply(&key(k), &rule, Op::Check { cost }, now + retry - 1));
                    prop_assert!(!early.allowed, "allowed 1 ns before retry_after");
                    let mut at = model.clone();
                    let on_time =
                        decision(at.apply(&key(k), &rule, Op::Check { cost }, now + retry));
                    prop_assert!(on_time.allowed, "denied at retry_after");
                }
                if let Some(wait) = rule.retry_after_allowed(&d, cost) {
                    // What the over-limit cache relies on: the next same check is
                    // denied until exactly `wait` (these rules are not shares).
                    let wait = u64::try_from(wait.as_nanos()).unwrap();
                    let mut before = model.clone();
                    let early =
                        decision(before.apply(&key(k), &rule, Op::Check { cost }, now + wait - 1));
                    prop_assert!(!early.allowed, "allowed 1 ns before retry_after_allowed");
                    let mut at = model.clone();
                    let on_time =
                        decision(at.apply(&key(k), &rule, Op::Check { cost }, now + wait));
                    prop_assert!(on_time.allowed, "denied at retry_after_allowed");
                } else if d.allowed && d.remaining < cost && is_meter_or_fixed(&rule) {
                    prop_assert!(false, "no retry_after_allowed for {d:?}");
                }
                prop_assert!(d.remaining <= d.limit);
                traces[usize::from(k)].push(Checked {
                    at_ns: now,
                    cost,
                    decision: d,
                });
            }
            _ => {}
        }
    }
    for trace in &traces {
        if let Err(broken) = invariants::check(&rule, trace) {
            return Err(TestCaseError::fail(broken));
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn every_algorithm_keeps_its_promise((rule, actions) in strategy::traffic_scenario()) {
        keeps_its_promise(&rule, &actions)?;
    }

    #[test]
    fn peeks_and_errors_change_nothing((rule, actions) in strategy::scenario()) {
        let mut model = Model::new();
        let holders: Vec<String> = (0..5).map(|h| format!("h{h}")).collect();
        let mut now = T0_NS;
        for action in &actions {
            let (k, op) = match *action {
                Action::Advance(ns) => { now += ns; continue; }
                Action::Check { key, cost } => (key, Op::Check { cost }),
                Action::Penalty { key, n } => (key, Op::Penalty { n }),
                Action::Reward { key, n } => (key, Op::Reward { n }),
                Action::Block { key, ns } => (key, Op::Block { duration_ns: ns }),
                Action::Unblock { key } => (key, Op::Unblock),
                Action::Reset { key } => (key, Op::Reset),
                Action::Inspect { key } => (key, Op::Inspect),
                Action::Acquire { key, holder, ttl_ns } => {
                    (key, Op::Acquire { holder: &holders[usize::from(holder)], ttl_ns })
                }
                Action::Release { key, holder } => {
                    (key, Op::Release { holder: &holders[usize::from(holder)] })
                }
            };
            let before = model.record(&key(k)).cloned();
            let inspect_before = model.clone().apply(&key(k), &rule, Op::Inspect, now);
            let result = model.apply(&key(k), &rule, op, now);
            let unchanged = matches!(op, Op::Check { cost: 0 } | Op::Inspect) || result.is_err();
            if unchanged {
                let inspect_after = model.clone().apply(&key(k), &rule, Op::Inspect, now);
                prop_assert_eq!(inspect_before, inspect_after, "{:?} changed usage", op);
                if result.is_err() {
                    prop_assert_eq!(before.as_ref().filter(|r| r.is_live(now)),
                        model.record(&key(k)), "an error changed the record");
                }
            }
        }
    }

    #[test]
    fn a_rule_change_mid_stream_never_breaks_a_key(
        (old, actions) in strategy::traffic_scenario(),
        new in strategy::any_rule(),
        switch_at in 0usize..80,
    ) {
        let mut model = Model::new();
        let mut now = T0_NS;
        model.apply(&key(0), &old, Op::Block { duration_ns: 1_000 }, now).unwrap();
        for (i, action) in actions.iter().enumerate() {
            let rule = if i < switch_at { old } else { new };
            match *action {
                Action::Advance(ns) => now += ns,
                Action::Check { key: k, cost } => {
                    let cost = cost.min(rule.limit());
                    let r = model.apply(&key(k), &rule, Op::Check { cost }, now);
                    let is_concurrency = matches!(rule.algorithm(), weir_core::Algorithm::Concurrency(_));
                    prop_assert!(r.is_ok() || is_concurrency, "{:?}", r);
                    if let Ok(Outcome::Usage(u)) = model.apply(&key(k), &rule, Op::Inspect, now) {
                        prop_assert!(u.remaining <= u.limit);
                    }
                }
                _ => {}
            }
        }
    }
}

#[test]
fn the_sliding_counter_stays_within_its_documented_bound_over_a_full_window() {
    // Limit 10 per 1 s in 100 ms buckets: any window of 1 s holds at most 10 plus one
    // bucket's admissions.
    let rule = Rule::sliding_window(
        10,
        std::time::Duration::from_secs(1),
        std::time::Duration::from_millis(100),
    )
    .unwrap();
    let mut model = Model::new();
    let mut trace = Vec::new();
    let start = 1_700_000_000_000_000_000u64;
    for i in 0..400u64 {
        let now = start + i * 7_000_000;
        let d = decision(model.apply(&key(0), &rule, Op::Check { cost: 1 }, now));
        trace.push(Checked {
            at_ns: now,
            cost: 1,
            decision: d,
        });
    }
    let worst = invariants::max_in_any_window(&trace, 1_000_000_000);
    let per_bucket = trace
        .iter()
        .filter(|c| c.decision.allowed)
        .fold(std::collections::HashMap::<u64, u64>::new(), |mut m, c| {
            *m.entry(c.at_ns / 100_000_000).or_default() += c.cost;
            m
        })
        .into_values()
        .max()
        .unwrap();
    assert!(worst <= 10 + per_bucket, "{worst} > 10 + {per_bucket}");
}

/// One key's checks of cost 1 under `rule`, one every `step_ns` from `T0_NS`.
fn steady_trace(rule: &Rule, step_ns: u64, checks: u64) -> Vec<Checked> {
    let mut model = Model::new();
    (0..checks)
        .map(|i| {
            let at_ns = T0_NS + i * step_ns;
            let d = decision(model.apply(&key(0), rule, Op::Check { cost: 1 }, at_ns));
            Checked {
                at_ns,
                cost: 1,
                decision: d,
            }
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn warm_up_keeps_its_ramp((rule, actions) in strategy::warm_rule()
        .prop_flat_map(|rule| (Just(rule), strategy::traffic(&rule, 120))))
    {
        keeps_its_promise(&rule, &actions)?;
    }
}

#[test]
fn the_ramp_bound_is_not_vacuous_and_a_cold_key_ramps() {
    use std::time::Duration;
    // 100 per second, burst 10, warm-up 1 s from a third of the rate.
    let plain = Rule::gcra(100, Duration::from_secs(1), 10).unwrap();
    let warm = plain.with_warmup(Duration::from_secs(1), 3).unwrap();
    // Asked every millisecond for 2 s.
    let plain_trace = steady_trace(&plain, 1_000_000, 2_000);
    let warm_trace = steady_trace(&warm, 1_000_000, 2_000);
    assert!(invariants::check(&warm, &plain_trace).is_err());
    invariants::check(&warm, &warm_trace).unwrap();
    // Admitted in [from, to), in ms from the start.
    let admitted = |trace: &[Checked], from: u64, to: u64| {
        let (from, to) = (T0_NS + from * 1_000_000, T0_NS + to * 1_000_000);
        trace
            .iter()
            .filter(|c| c.decision.allowed && c.at_ns >= from && c.at_ns < to)
            .count()
    };
    // 100 ms at a time: a third of the rate cold, rising with use, the full rate after W.
    let per_100ms = [(10, 3), (110, 4), (500, 5), (1_000, 10), (1_900, 10)];
    for (from, n) in per_100ms {
        assert_eq!(admitted(&warm_trace, from, from + 100), n, "from {from} ms");
        assert_eq!(admitted(&plain_trace, from, from + 100), 10);
    }
    // Cold: a burst of 1 + 9/3 at once.
    let mut model = Model::new();
    let burst = (0..10)
        .filter(|_| decision(model.apply(&key(1), &warm, Op::Check { cost: 1 }, T0_NS)).allowed)
        .count();
    assert_eq!(burst, 4);
}
