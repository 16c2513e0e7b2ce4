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
    let mut s = Settings::default();
    s.engine.rules = RuleSource::Inline {
        name: "d.yaml",
        yaml: RULES,
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
