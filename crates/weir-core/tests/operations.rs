//! Every operation on a key, through the pure step: lockout, block, inspect, errors that
//! change nothing, and how usage carries over when a rule changes.

#![allow(clippy::unwrap_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::step::apply;
use weir_core::{CheckError, Decision, Lockout, Op, Outcome, Record, Rule};

const SEC: u64 = 1_000_000_000;

fn run(rule: &Rule, record: &mut Record, op: Op<'_>, now_ns: u64) -> Decision {
    match apply(rule, record, &op, now_ns).unwrap() {
        Outcome::Decision(d) => d,
        other => panic!("expected a decision, got {other:?}"),
    }
}

#[test]
fn a_cost_above_capacity_is_an_error_not_a_denial() {
    let rule = Rule::per_second(5).unwrap();
    let mut r = Record::fresh(&rule, 0);
    let err = apply(&rule, &mut r, &Op::Check { cost: 6 }, SEC).unwrap_err();
    assert_eq!(
        err,
        CheckError::CostAboveCapacity {
            cost: 6,
            capacity: 5
        }
    );
    assert_eq!(r, Record::fresh(&rule, 0), "an error changes nothing");
}

#[test]
fn lockout_blocks_then_escalates() {
    let lockout = Lockout::new(Duration::from_secs(60))
        .unwrap()
        .escalating(Duration::from_secs(600))
        .unwrap();
    let rule = Rule::sliding_log(3, Duration::from_secs(60))
        .unwrap()
        .with_lockout(lockout);
    let mut r = Record::fresh(&rule, 0);
    let t = 1_000 * SEC;
    for _ in 0..3 {
        assert!(run(&rule, &mut r, Op::Check { cost: 1 }, t).allowed);
    }
    let d = run(&rule, &mut r, Op::Check { cost: 1 }, t);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Duration::from_secs(60));
    let d = run(&rule, &mut r, Op::Check { cost: 1 }, t + 30 * SEC);
    assert_eq!(d.retry_after, Duration::from_secs(30), "still locked out");
    // After the lockout the window has expired; three more failures lock for 2 minutes.
    let t2 = t + 61 * SEC;
    for _ in 0..3 {
        assert!(run(&rule, &mut r, Op::Check { cost: 1 }, t2).allowed);
    }
    let d = run(&rule, &mut r, Op::Check { cost: 1 }, t2);
    assert_eq!(d.retry_after, Duration::from_secs(120));
    apply(&rule, &mut r, &Op::Reset, t2).unwrap();
    assert!(!r.is_live(t2), "reset forgets everything");
}

#[test]
fn block_unblock_and_inspect() {
    let rule = Rule::fixed_window(10, Duration::from_secs(60)).unwrap();
    let mut r = Record::fresh(&rule, 0);
    run(&rule, &mut r, Op::Check { cost: 4 }, SEC);
    apply(
        &rule,
        &mut r,
        &Op::Block {
            duration_ns: 5 * SEC,
        },
        SEC,
    )
    .unwrap();
    let d = run(&rule, &mut r, Op::Check { cost: 1 }, 2 * SEC);
    assert!(!d.allowed);
    assert_eq!(d.retry_after, Duration::from_secs(4));
    let Outcome::Usage(u) = apply(&rule, &mut r, &Op::Inspect, 2 * SEC).unwrap() else {
        panic!()
    };
    assert_eq!((u.used, u.remaining), (4, 6));
    assert_eq!(u.blocked_for, Duration::from_secs(4));
    apply(&rule, &mut r, &Op::Unblock, 2 * SEC).unwrap();
    assert!(run(&rule, &mut r, Op::Check { cost: 1 }, 2 * SEC).allowed);
}

#[test]
fn a_rule_change_to_another_algorithm_keeps_the_block() {
    let old = Rule::fixed_window(1, Duration::from_secs(60)).unwrap();
    let new = Rule::per_second(1).unwrap();
    let mut r = Record::fresh(&old, 0);
    apply(
        &old,
        &mut r,
        &Op::Block {
            duration_ns: 10 * SEC,
        },
        SEC,
    )
    .unwrap();
    assert!(!run(&new, &mut r, Op::Check { cost: 1 }, 2 * SEC).allowed);
}

fn used(rule: &Rule, r: &mut Record, now_ns: u64) -> u64 {
    match apply(rule, r, &Op::Inspect, now_ns).unwrap() {
        Outcome::Usage(u) => u.used,
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_changed_limit_carries_usage_over_as_documented() {
    let t = 1_000 * SEC;
    let minute = Duration::from_secs(60);

    // Fixed window: the count carries over within the current window.
    let (old, new) = (
        Rule::fixed_window(10, minute).unwrap(),
        Rule::fixed_window(5, minute).unwrap(),
    );
    let mut r = Record::fresh(&old, t);
    run(&old, &mut r, Op::Check { cost: 4 }, t);
    assert_eq!(used(&new, &mut r, t), 4);
    assert_eq!(run(&new, &mut r, Op::Check { cost: 1 }, t).remaining, 0);

    // Token bucket: tokens carry over, capped at the new capacity.
    let (old, new) = (
        Rule::token_bucket(10, 1, Duration::from_secs(1)).unwrap(),
        Rule::token_bucket(3, 1, Duration::from_secs(1)).unwrap(),
    );
    let mut r = Record::fresh(&old, t);
    run(&old, &mut r, Op::Check { cost: 2 }, t);
    assert_eq!(run(&new, &mut r, Op::Check { cost: 0 }, t).remaining, 3);

    // GCRA: the time debt carries over and is re-read under the new rate.
    let (old, new) = (Rule::per_second(10).unwrap(), Rule::per_second(20).unwrap());
    let mut r = Record::fresh(&old, t);
    run(&old, &mut r, Op::Check { cost: 5 }, t); // owes 500 ms
    assert_eq!(used(&new, &mut r, t), 10, "500 ms is 10 units at 20/s");

    // Sliding log: timestamps carry over and expire under the new window.
    let (old, new) = (
        Rule::sliding_log(3, minute).unwrap(),
        Rule::sliding_log(3, Duration::from_secs(10)).unwrap(),
    );
    let mut r = Record::fresh(&old, t);
    run(&old, &mut r, Op::Check { cost: 3 }, t);
    assert!(!run(&new, &mut r, Op::Check { cost: 1 }, t + 9 * SEC).allowed);
    assert!(run(&new, &mut r, Op::Check { cost: 1 }, t + 10 * SEC).allowed);
}

#[test]
fn wrong_operations_are_named() {
    let tb = Rule::token_bucket(1, 1, Duration::from_secs(1)).unwrap();
    let mut r = Record::fresh(&tb, 0);
    let err = apply(
        &tb,
        &mut r,
        &Op::Acquire {
            holder: "a",
            ttl_ns: 1,
        },
        0,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "acquire is not supported by the token_bucket algorithm"
    );
}

/// Issue 10: an admin `unblock` of a login lockout used to lift the block only; the sliding
/// log stayed full, so the next attempt locked the account again, escalated (600 s, two
/// strikes). Unblock now lets the key try again: no lockout, no escalation.
#[tokio::test]
async fn unblock_lifts_a_lockout_and_forgives_it() {
    use weir_core::{Key, Limiter, ManualClock, MemoryStore};
    let clock = ManualClock::new(1_000 * SEC);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let rule = Rule::sliding_log(3, Duration::from_secs(60))
        .unwrap()
        .with_lockout(
            Lockout::new(Duration::from_secs(300))
                .unwrap()
                .escalating(Duration::from_secs(3600))
                .unwrap(),
        );
    let key = Key::new("login:alice").unwrap();
    for _ in 0..3 {
        assert!(limiter.check(&key, &rule, 1).await.unwrap().allowed);
    }
    let locked = limiter.check(&key, &rule, 1).await.unwrap();
    assert!(!locked.allowed);
    assert_eq!(locked.retry_after, Duration::from_secs(300));

    clock.advance(Duration::from_secs(10));
    limiter.unblock(&key, &rule).await.unwrap();
    let after = limiter.check(&key, &rule, 1).await.unwrap();
    assert!(
        after.allowed,
        "the next attempt after an unblock is allowed"
    );
    // Three more failures lock it out again for the base duration: the strike was forgiven.
    limiter.check(&key, &rule, 1).await.unwrap();
    limiter.check(&key, &rule, 1).await.unwrap();
    let again = limiter.check(&key, &rule, 1).await.unwrap();
    assert!(!again.allowed);
    assert_eq!(
        again.retry_after,
        Duration::from_secs(300),
        "not escalated to 600 s"
    );
}
