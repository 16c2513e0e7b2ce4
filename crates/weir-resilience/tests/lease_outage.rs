//! Leased mode when the shared store goes away: the slice in hand keeps being spent without
//! a store call, then the next claim meets the outage and the rule's failure policy
//! decides (here the local fallback with this instance's share, then fail-closed), and no
//! check errors. The store is a real memory store behind a fault switch.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Decision, FailurePolicy, Key, Op, Outcome, Rule, Store};
use weir_resilience::{FailoverConfig, FailoverStore, LeaseConfig, LeasedStore};
use weir_testkit::faults::{Fault, FaultyStore};

async fn check<S: Store>(store: &S, key: &Key, rule: &Rule, now: u64) -> Decision {
    match store
        .apply(
            weir_core::ScopedKey::plain(key),
            rule,
            Op::Check { cost: 1 },
            now,
        )
        .await
    {
        Ok(Outcome::Decision(d)) => d,
        other => panic!("{other:?}"),
    }
}

fn stack(primary: &FaultyStore) -> LeasedStore<FailoverStore<FaultyStore>> {
    let failover = FailoverConfig {
        timeout: Duration::from_millis(30),
        first_timeout: Duration::from_millis(30),
        failure_threshold: 1,
        instances: 2,
        ..FailoverConfig::default()
    };
    LeasedStore::new(
        FailoverStore::new(primary.clone(), failover),
        LeaseConfig::default(),
    )
}

/// A busy key holds a slice; the store goes down; the slice is spent with no store call;
/// then the local fallback allows this instance's share.
#[tokio::test]
async fn a_slice_is_spent_through_an_outage_then_the_failure_policy_decides() {
    let primary = FaultyStore::new();
    let store = stack(&primary);
    // 400 per minute: slices of up to 100 units living 6 s.
    let rule = Rule::fixed_window(400, Duration::from_secs(60))
        .unwrap()
        .leased()
        .unwrap();
    let key = Key::new("k").unwrap();
    let t0 = 60_000_000_000u64; // the start of a window
                                // Warm up: 20 checks a millisecond apart make the key busy, so its next slice is large.
    for i in 0..20 {
        assert!(check(&store, &key, &rule, t0 + i * 1_000_000).await.allowed);
    }
    let now = t0 + 20_000_000;
    let held = store.held_units(now);
    assert!(held >= 10, "a busy key holds a slice ({held})");

    primary.set(Fault::Down);
    let calls = primary.calls();
    for i in 0..held {
        assert!(check(&store, &key, &rule, now + i).await.allowed);
    }
    assert_eq!(
        primary.calls(),
        calls,
        "the slice is spent without the store"
    );

    // The next claim meets the outage: the local fallback gives this instance its share
    // (400 / 2 instances) of the window, counted locally; nothing errors.
    let mut allowed = 0;
    for i in 0..300 {
        allowed += u64::from(check(&store, &key, &rule, now + held + i).await.allowed);
    }
    assert!(
        allowed > 0 && allowed <= 200,
        "allowed {allowed} in fallback"
    );
}

/// A leased rule that fails closed denies once its slice is spent and the store is down.
#[tokio::test]
async fn a_fail_closed_leased_rule_denies_after_its_slice() {
    let primary = FaultyStore::new();
    let store = stack(&primary);
    let rule = Rule::gcra(100, Duration::from_secs(1), 100)
        .unwrap()
        .on_failure(FailurePolicy::FailClosed)
        .leased()
        .unwrap();
    let key = Key::new("k").unwrap();
    let now = 1_000_000_000u64;
    assert!(check(&store, &key, &rule, now).await.allowed);
    primary.set(Fault::Down);
    for i in 1..50 {
        let d = check(&store, &key, &rule, now + i).await;
        assert!(!d.allowed, "check {i} allowed with the store down");
    }
}
