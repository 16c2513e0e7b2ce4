//! `/metrics`: decisions by domain, rule and outcome (near the limit included), store
//! latency, reloads, the memory store's size, and never a client key or value as a label.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, envoy_readme_dir, settings, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_outcomes_with_bounded_labels() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        let secret = "client-secret-value-4711";
        let body = check_body("edge_proxy_per_ip", &[("remote_address", secret)]);
        for _ in 0..11 {
            server.post("/v1/check", &body).await;
        }
        server
            .post("/v1/check", &check_body("internal", &[("ldap", secret)]))
            .await;
        server
            .post("/v1/check", &check_body("internal", &[("nothing", secret)]))
            .await;
        server
            .post("/v1/check", &check_body("no-such-domain", &[("a", secret)]))
            .await;
        server.post("/v1/check", "{broken").await;
        let a = server.get("/metrics").await;
        assert_eq!(a.status, 200);
        assert!(a
            .header("content-type")
            .unwrap()
            .starts_with("application/openmetrics-text"));
        let m = a.body;
        let has = |line: &str| assert!(m.contains(line), "missing {line}\n{m}");
        let rule = r#"domain="edge_proxy_per_ip",rule="edge_proxy_per_ip.remote_address""#;
        has(&format!(
            "weir_decisions_total{{{rule},outcome=\"allowed\"}} 8"
        ));
        has(&format!(
            "weir_decisions_total{{{rule},outcome=\"near_limit\"}} 2"
        ));
        has(&format!(
            "weir_decisions_total{{{rule},outcome=\"denied\"}} 1"
        ));
        has(
            r#"weir_decisions_total{domain="internal",rule="internal.ldap",outcome="unlimited"} 1"#,
        );
        has(r#"weir_decisions_total{domain="internal",rule="",outcome="no_rule"} 1"#);
        has(r#"weir_decisions_total{domain="_unknown",rule="",outcome="no_rule"} 1"#);
        has(r#"weir_requests_total{api="http",result="over_limit"} 1"#);
        has(r#"weir_requests_total{api="http",result="invalid"} 1"#);
        has("weir_store_duration_seconds_count 11");
        has(r#"weir_store_fallback{store="memory"} 0"#);
        has("weir_config_last_reload_successful 1");
        has("weir_config_rules ");
        has("weir_memory_store_keys 1");
        assert!(!m.contains(secret), "a client value leaked into a label");
        assert!(
            !m.contains("no-such-domain"),
            "an unknown domain leaked into a label"
        );
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_alert_rules_use_only_exported_metrics() {
    bounded(async {
        let alerts_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../deploy/prometheus/alerts.yaml");
        let alerts = std::fs::read_to_string(alerts_path).unwrap();
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        server
            .post("/v1/check", &check_body("internal", &[("azure", "x")]))
            .await;
        let exported = server.get("/metrics").await.body;
        let mut names: Vec<&str> = alerts
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("weir_"))
            .collect();
        names.sort_unstable();
        names.dedup();
        assert!(names.len() >= 6, "{names:?}");
        for name in names {
            let family = ["_bucket", "_total"]
                .iter()
                .fold(name, |n, suffix| n.strip_suffix(suffix).unwrap_or(n));
            assert!(
                exported.contains(&format!("# TYPE {family} ")),
                "deploy/prometheus/alerts.yaml uses {name}, which /metrics does not export"
            );
        }
        server.stop().await.unwrap();
    })
    .await;
}
