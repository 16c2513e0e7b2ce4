//! The failover store under injected faults: limiting goes on under each policy, no request
//! waits past the timeout, the probe switches back, and outage usage is reconciled.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Clock, Decision, FailurePolicy, Key, Op, Outcome, Rule, Store, SystemClock};
use weir_resilience::{FailoverConfig, FailoverStore, Mode};
use weir_testkit::faults::{Fault, FaultyStore};

fn config() -> FailoverConfig {
    FailoverConfig {
        timeout: Duration::from_millis(30),
        // The fault switch stands for a store that has answered before.
        first_timeout: Duration::from_millis(30),
        failure_threshold: 2,
        probe_interval: Duration::from_millis(20),
        instances: 2,
        reconcile: true,
        ..FailoverConfig::default()
    }
}

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

/// Waits (bounded) until the store is back in `Store` mode.
async fn until_store_mode<S: Store>(store: &FailoverStore<S>) {
    for _ in 0..200 {
        if store.mode() == Mode::Store {
            return;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("the probe never switched back");
}

#[tokio::test]
async fn local_fallback_limits_with_this_instances_share_and_no_request_fails() {
    let primary = FaultyStore::new();
    let store = FailoverStore::new(primary.clone(), config());
    let rule = Rule::fixed_window(10, Duration::from_secs(60)).unwrap();
    let key = Key::new("k").unwrap();
    let now = SystemClock::new().now_ns();

    primary.set(Fault::Down);
    let allowed = {
        let mut n = 0;
        for _ in 0..20 {
            n += u32::from(check(&store, &key, &rule, now).await.allowed);
        }
        n
    };
    assert_eq!(allowed, 5, "two instances share 10: this one allows 5");
    assert_eq!(store.mode(), Mode::Fallback);
    let calls_when_open = primary.calls();
    check(&store, &key, &rule, now).await;
    assert!(
        primary.calls() <= calls_when_open + 1,
        "an open circuit skips the store"
    );

    primary.set(Fault::None);
    until_store_mode(&store).await;
    assert!(check(&store, &key, &rule, now).await.allowed);
    let stats = store.stats();
    assert_eq!(stats.mode_changes, 2);
    assert_eq!(stats.reconciled_keys, 1);
    let usage = primary
        .store()
        .apply_now(&key, &rule, Op::Inspect, now)
        .unwrap();
    let Outcome::Usage(u) = usage else { panic!() };
    assert_eq!(
        u.used, 6,
        "5 counted during the outage, pushed on recovery, plus 1"
    );
}

#[tokio::test]
async fn fail_open_and_fail_closed_rules() {
    let primary = FaultyStore::new();
    let store = FailoverStore::new(primary.clone(), config());
    let key = Key::new("k").unwrap();
    let open = Rule::fixed_window(1, Duration::from_secs(60))
        .unwrap()
        .on_failure(FailurePolicy::FailOpen);
    let closed = open.on_failure(FailurePolicy::FailClosed);
    primary.set(Fault::Down);
    for _ in 0..5 {
        assert!(check(&store, &key, &open, 1).await.allowed);
        let d = check(&store, &key, &closed, 1).await;
        assert!(!d.allowed);
        assert_eq!(d.retry_after, config().probe_interval);
    }
    // Operators' operations are not faked while the store is down.
    let inspect = store
        .apply(weir_core::ScopedKey::plain(&key), &open, Op::Inspect, 1)
        .await;
    assert!(inspect.is_err());
}

#[tokio::test]
async fn a_hanging_store_costs_at_most_the_timeout_and_then_nothing() {
    let primary = FaultyStore::new();
    let store = FailoverStore::new(primary.clone(), config());
    let rule = Rule::per_second(100).unwrap();
    let key = Key::new("k").unwrap();
    primary.set(Fault::Hang);
    // Bounded: if a call waited on the hanging store without a timeout, this would fail.
    let fifty = async {
        for _ in 0..50 {
            check(&store, &key, &rule, 1).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), fifty)
        .await
        .expect("decisions hung on a hanging store");
    // Two timeouts and the PING that confirms them (which hangs too) open the circuit;
    // the other 48 decisions never reach the store.
    assert_eq!(store.stats().store_timeouts, 2);
    assert_eq!(primary.calls(), 3);
    primary.set(Fault::None);
    until_store_mode(&store).await;
}

/// Issue 10: an admin `block` during an outage, on a local-fallback rule, answered OK but
/// was applied only to the local store and lost when the store came back. Operator
/// operations never fall back: they fail and say why.
#[tokio::test]
async fn operator_operations_never_fall_back() {
    let primary = FaultyStore::new();
    let store = FailoverStore::new(primary.clone(), config());
    let rule = Rule::fixed_window(10, Duration::from_secs(60)).unwrap();
    assert_eq!(rule.failure_policy(), FailurePolicy::LocalFallback);
    let key = Key::new("k").unwrap();
    let now = SystemClock::new().now_ns();
    primary.set(Fault::Down);
    for op in [
        Op::Block {
            duration_ns: 60_000_000_000,
        },
        Op::Unblock,
        Op::Reset,
        Op::Inspect,
        // Issue 29: the admin API's penalty and reward answered 200 from the local
        // fallback and were lost when the store returned.
        Op::Penalty { n: 3 },
        Op::Reward { n: 3 },
    ] {
        let err = store
            .apply(weir_core::ScopedKey::plain(&key), &rule, op, now)
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("was not applied") && text.contains(op.name()),
            "{op:?}: {text}"
        );
    }
    // Decisions still fall back.
    assert!(check(&store, &key, &rule, now).await.allowed);
}

/// Issue 29: on a loaded host many calls time out together in one slow moment, and three
/// consecutive failures opened the circuit for the whole store, so fail_closed rules
/// answered 429 until the next probe. Failures open it only when a PING of the store fails
/// too: a store whose decisions were slow but which answers is never taken for dead.
#[tokio::test]
async fn a_slow_moment_is_not_an_outage() {
    let primary = FaultyStore::new();
    let store = FailoverStore::new(primary.clone(), config());
    let rule = Rule::per_second(100).unwrap();
    let key = Key::new("k").unwrap();
    primary.set(Fault::HangCalls);
    for _ in 0..10 {
        // Each times out and its rule's policy decides it (local fallback: allowed).
        assert!(check(&store, &key, &rule, 1).await.allowed);
    }
    assert_eq!(store.stats().store_timeouts, 10);
    assert_eq!(store.mode(), Mode::Store, "the store answered every PING");
    assert_eq!(store.stats().mode_changes, 0);
    primary.set(Fault::None);
    assert!(check(&store, &key, &rule, 1).await.allowed);
    assert_eq!(store.stats().store_timeouts, 10);
}

/// A peek changes nothing, so one that fails is tried once more before the failure
/// policy decides; a check that charges is never tried twice (the first may have counted).
#[tokio::test]
async fn a_failed_peek_is_tried_again_a_charging_check_is_not() {
    let primary = FaultyStore::new();
    // No confirming PING among the calls counted.
    let quiet = FailoverConfig {
        failure_threshold: 100,
        ..config()
    };
    let store = FailoverStore::new(primary.clone(), quiet);
    let rule = Rule::per_second(100).unwrap();
    let key = Key::new("k").unwrap();
    primary.set(Fault::HangCalls);
    let before = primary.calls();
    let _ = store
        .apply(
            weir_core::ScopedKey::plain(&key),
            &rule,
            Op::Check { cost: 0 },
            1,
        )
        .await;
    assert_eq!(primary.calls() - before, 2, "a peek is tried twice");
    let before = primary.calls();
    let _ = store
        .apply(
            weir_core::ScopedKey::plain(&key),
            &rule,
            Op::Check { cost: 1 },
            1,
        )
        .await;
    assert_eq!(primary.calls() - before, 1, "a check that charges, once");
}
