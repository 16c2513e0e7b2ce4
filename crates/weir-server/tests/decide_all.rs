//! The engine's all-or-nothing mode (`Engine::decide_all`, what `weir proxy` decides on):
//! a rule whose cost it cannot honour is refused with a reason, never charged less; a
//! request within every limit is charged once on each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use weir_config::Descriptor;
use weir_server::{App, DecideError, RuleSource, Settings};

const RULES: &str = "
domain: d
descriptors:
  - key: user
    rule: {algorithm: fixed_window, limit: 2, window: 1h}
  - key: export
    rule: {algorithm: fixed_window, limit: 30, window: 1h, cost: 10}
";

async fn app() -> App {
    app_with(RULES).await
}

/// A server whose engine runs `rules` (domain `d`) on the memory store.
async fn app_with(rules: &'static str) -> App {
    let mut s = Settings::default();
    s.engine.rules = RuleSource::Inline {
        name: "d.yaml",
        yaml: rules,
    };
    App::new(s).await.unwrap()
}

#[tokio::test]
async fn a_rule_with_its_own_cost_is_refused_not_undercharged() {
    let app = app().await;
    let d = [Descriptor::new([("export", "report")])];
    match app.engine().decide_all("d", &d, 1).await {
        Err(DecideError::Rule { rule, reason }) => {
            assert_eq!(rule, "d.export");
            assert!(reason.contains("same cost"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn limits_are_charged_all_or_nothing() {
    let app = app().await;
    let d = [Descriptor::new([("user", "alice")])];
    for _ in 0..2 {
        assert!(app.engine().decide_all("d", &d, 1).await.unwrap().allowed);
    }
    let third = app.engine().decide_all("d", &d, 1).await.unwrap();
    assert!(!third.allowed);
    assert_eq!(third.denied_by, Some(0));
    assert_eq!(&*third.limits[0].rule_id, "d.user");
}

/// `decide_all_now` (the memory store decides in place, what the proxy asks first) and
/// `decide_all` (awaited) give the same verdicts, step by step, on twin engines: within
/// the limit, over it, a shadow rule's denial (the others still charged), a block list.
#[tokio::test]
async fn decided_now_or_awaited_the_verdicts_are_the_same() {
    const TWIN_RULES: &str = "
domain: d
descriptors:
  - key: user
    rule: {algorithm: fixed_window, limit: 3, window: 1h}
  - key: team
    rule: {algorithm: sliding_window, limit: 2, window: 1h, precision: 1m, shadow: true}
  - key: banned
    rate_limit: {unit: hour, requests_per_unit: 0}
";
    let (now, awaited) = (app_with(TWIN_RULES).await, app_with(TWIN_RULES).await);
    let requests = [
        vec![
            Descriptor::new([("user", "ann")]),
            Descriptor::new([("team", "t")]),
        ],
        vec![
            Descriptor::new([("user", "ann")]),
            Descriptor::new([("team", "t")]),
        ],
        vec![
            Descriptor::new([("user", "ann")]),
            Descriptor::new([("team", "t")]),
        ],
        vec![Descriptor::new([("user", "ann")])],
        vec![
            Descriptor::new([("user", "bob")]),
            Descriptor::new([("banned", "x")]),
        ],
        vec![Descriptor::new([("nothing", "here")])],
    ];
    // What a verdict says, without the times (the two engines read their clocks apart).
    let said = |v: &weir_engine::AllVerdict| {
        let limits: Vec<_> = v
            .limits
            .iter()
            .map(|l| {
                let d = l.decision;
                (
                    l.rule_id.to_string(),
                    l.key.to_string(),
                    d.allowed,
                    d.limit,
                    d.remaining,
                )
            })
            .collect();
        (v.allowed, v.denied_by, v.blocked, limits)
    };
    for (i, descriptors) in requests.iter().enumerate() {
        let decided = now.engine().decide_all_now("d", descriptors, 1);
        let decided = decided.expect("the memory store decides in place").unwrap();
        let waited = awaited
            .engine()
            .decide_all("d", descriptors, 1)
            .await
            .unwrap();
        assert_eq!(said(&decided), said(&waited), "request {i}");
    }
    // The third request's shadow denial did not spare ann's limit: her three are spent.
    let fourth = now
        .engine()
        .decide_all_now("d", &requests[3], 1)
        .unwrap()
        .unwrap();
    assert!(!fourth.allowed, "ann's three are spent: {fourth:?}");
}
