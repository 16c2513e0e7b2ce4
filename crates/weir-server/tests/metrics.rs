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
        // No Accept: the Prometheus text format (OpenMetrics only to a client that accepts
        // nothing else: weir-cli/tests/ratelimit_stats.rs).
        assert_eq!(
            a.header("content-type").unwrap(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
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

/// Issue 15: the files in `deploy/` a deployment loads into Prometheus and Grafana name
/// only series a running server exports (a renamed metric would leave a blank panel or a
/// silent alert).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_recording_rules_and_alerts_use_only_exported_metrics() {
    bounded(async {
        let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        server
            .post("/v1/check", &check_body("internal", &[("azure", "x")]))
            .await;
        let exported = server.get("/metrics").await.body;
        for file in [
            "prometheus/alerts.yaml",
            "prometheus/recording-rules.yaml",
            "grafana/weir-dashboard.json",
        ] {
            let text = std::fs::read_to_string(deploy.join(file)).unwrap();
            if file.ends_with(".json") {
                let _: serde_json::Value = serde_json::from_str(&text).unwrap();
            }
            let mut names: Vec<&str> = text
                .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                // A word ending in `_` is a prefix in prose (`weir_*`), not a metric.
                .filter(|w| {
                    !w.ends_with('_')
                        && ["weir_", "ratelimit_service_", "process_"]
                            .iter()
                            .any(|prefix| w.starts_with(prefix))
                })
                .collect();
            names.sort_unstable();
            names.dedup();
            assert!(names.len() >= 6, "{file}: {names:?}");
            for name in names {
                let family = ["_bucket", "_count", "_sum", "_total"]
                    .iter()
                    .fold(name, |n, suffix| n.strip_suffix(suffix).unwrap_or(n));
                // The text format names a counter family as its samples (`x_total`).
                assert!(
                    exported.contains(&format!("# TYPE {family} "))
                        || exported.contains(&format!("# TYPE {family}_total counter")),
                    "deploy/{file} uses {name}, which /metrics does not export"
                );
            }
        }
        server.stop().await.unwrap();
    })
    .await;
}

/// Hits in envoyproxy/ratelimit's units and names, a latency histogram per API, the build
/// and the process (issue 15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_latency_build_and_process_are_exported() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        // edge_proxy_per_ip: 10 a second; 12 requests of one hit each.
        let body = check_body("edge_proxy_per_ip", &[("remote_address", "10.0.0.9")]);
        for _ in 0..12 {
            server.post("/v1/check", &body).await;
        }
        let m = server.get("/metrics").await.body;
        let has = |line: &str| assert!(m.contains(line), "missing {line}\n{m}");
        let labels = r#"{domain="edge_proxy_per_ip",key1="remote_address",key2=""}"#;
        has(&format!(
            "ratelimit_service_rate_limit_total_hits{labels} 12"
        ));
        has(&format!(
            "ratelimit_service_rate_limit_within_limit{labels} 10"
        ));
        has(&format!(
            "ratelimit_service_rate_limit_near_limit{labels} 2"
        ));
        has(&format!(
            "ratelimit_service_rate_limit_over_limit{labels} 2"
        ));
        has(&format!(
            "ratelimit_service_rate_limit_shadow_mode{labels} 0"
        ));
        has(r#"weir_request_duration_seconds_count{api="http"} 12"#);
        has(r#"weir_request_duration_seconds_count{api="grpc"} 0"#);
        has(&format!(
            "weir_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        ));
        if cfg!(target_os = "linux") {
            for name in [
                "process_cpu_seconds_total ",
                "process_resident_memory_bytes ",
                "process_open_fds ",
                "process_max_fds ",
                "process_start_time_seconds ",
                "process_threads ",
            ] {
                has(name);
            }
        }
        server.stop().await.unwrap();
    })
    .await;
}
