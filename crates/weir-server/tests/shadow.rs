//! Shadow mode and gradual roll-out: denials that are computed, counted and reported but
//! not enforced, per rule, globally, and for the share of keys outside a rule's
//! enforcement percentage.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, settings, Scratch, TestServer};
use serde_json::Value;

const RULES: &str = "\
domain: d
descriptors:
  - key: shadowed
    rule: {algorithm: fixed_window, limit: 1, window: 1m, shadow: true}
  - key: enforced
    rule: {algorithm: fixed_window, limit: 1, window: 1m}
  - key: rollout
    rule: {algorithm: fixed_window, limit: 1, window: 1m, enforce_percent: 50}
";

async fn twice(server: &TestServer, key: &str, value: &str) -> (u16, Value) {
    let body = check_body("d", &[(key, value)]);
    server.post("/v1/check", &body).await;
    let a = server.post("/v1/check", &body).await;
    (a.status, serde_json::from_str(&a.body).unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_rule_reports_and_counts_but_never_denies() {
    bounded(async {
        let dir = Scratch::new("shadow");
        let (settings, _clock) = settings(Some(&dir.write("rules.yaml", RULES)));
        let server = TestServer::start(settings).await;
        let (status, v) = twice(&server, "shadowed", "alice").await;
        assert_eq!(status, 200);
        assert_eq!(v["overall_code"], "OK");
        assert_eq!(v["descriptors"][0]["code"], "OK");
        assert_eq!(v["descriptors"][0]["shadow_denied"], true);
        assert_eq!(v["descriptors"][0]["remaining"], 0);
        let (status, _) = twice(&server, "enforced", "alice").await;
        assert_eq!(status, 429);
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains(
                r#"weir_decisions_total{domain="d",rule="d.shadowed",outcome="shadow_denied"} 1"#
            ),
            "{metrics}"
        );
        assert!(
            metrics.contains(
                r#"weir_decisions_total{domain="d",rule="d.enforced",outcome="denied"} 1"#
            ),
            "{metrics}"
        );
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_shadow_mode_enforces_nothing_and_reports_everything() {
    bounded(async {
        let dir = Scratch::new("global-shadow");
        let (mut settings, _clock) = settings(Some(&dir.write("rules.yaml", RULES)));
        settings.engine.shadow = true;
        let server = TestServer::start(settings).await;
        let body = check_body("d", &[("enforced", "bob")]);
        server.post("/v1/check", &body).await;
        let a = server.post("/v1/check", &body).await;
        assert_eq!(a.status, 200, "never enforced");
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["overall_code"], "OK");
        // As envoyproxy/ratelimit's SHADOW_MODE: the descriptor still says OVER_LIMIT.
        assert_eq!(v["descriptors"][0]["code"], "OVER_LIMIT");
        assert_eq!(v["descriptors"][0]["shadow_denied"], true);
        assert_eq!(a.header("ratelimit"), Some("\"d.enforced\";r=0;t=60"));
        assert_eq!(a.header("retry-after"), None);
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains(
                r#"weir_decisions_total{domain="d",rule="d.enforced",outcome="shadow_denied"} 1"#
            ),
            "{metrics}"
        );
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_enforcement_percentage_enforces_a_stable_share_of_keys() {
    bounded(async {
        let dir = Scratch::new("rollout");
        let (settings, _clock) = settings(Some(&dir.write("rules.yaml", RULES)));
        let server = TestServer::start(settings).await;
        let mut enforced = Vec::new();
        for i in 0..200 {
            let (status, _) = twice(&server, "rollout", &format!("user-{i}")).await;
            enforced.push(status == 429);
        }
        let share = enforced.iter().filter(|&&e| e).count();
        assert!(
            (60..=140).contains(&share),
            "about half of 200 keys enforced: {share}"
        );
        // Deterministic per key: the same keys are enforced again.
        for (i, was) in enforced.iter().enumerate().take(40) {
            let body = check_body("d", &[("rollout", &format!("user-{i}"))]);
            let again = server.post("/v1/check", &body).await.status == 429;
            assert_eq!(again, *was, "user-{i}");
        }
        server.stop().await.unwrap();
    })
    .await;
}
