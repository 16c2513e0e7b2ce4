//! Issue 26: a `fail_closed` rule during a store outage answered exactly like a real limit
//! (`429`, `Retry-After: 1`, `remaining 0`), so an operator could not tell an outage from
//! an attack. Now each API says so (`/v1/check`: the descriptor's `"reason":
//! "store_unavailable"` and `x-weir-reason: store-unavailable`; `/json`: the header; gRPC:
//! the response metadata) and the metrics count it as `outcome="failed_closed"`; a real
//! limit carries none of them. Against a real `redis-server`, killed mid-test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, check_body, descriptor, request, settings, Scratch, TestServer};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as EnvoyCode;
use serde_json::Value;
use weir_server::{StoreClock, StoreSpec};
use weir_testkit::servers::RedisServer;

const RULES: &str = "domain: d
descriptors:
  - key: login
    rule: {algorithm: fixed_window, limit: 1, window: 1h, on_failure: fail_closed}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_closed_denial_during_an_outage_says_so() {
    let mut redis = RedisServer::start();
    bounded(async {
        let dir = Scratch::new("failed-closed");
        let rules = dir.write("rules.yaml", RULES);
        let (mut settings, _clock) = settings(Some(&rules));
        settings.engine.store = StoreSpec::parse(&redis.url()).unwrap();
        settings.engine.store_clock = StoreClock::Process;
        // A debug build's first calls (loading Weir's functions) may take longer than the
        // default 50 ms under a busy machine: they would fail closed before the outage.
        settings.engine.failover.timeout = Duration::from_secs(10);
        let server = TestServer::start(settings).await;

        // A real limit: no reason.
        let alice = check_body("d", &[("login", "alice")]);
        let first = server.post("/v1/check", &alice).await;
        assert_eq!(first.status, 200, "{}", first.body);
        let limited = server.post("/v1/check", &alice).await;
        assert_eq!(limited.status, 429);
        assert_eq!(limited.header("x-weir-reason"), None);
        let body: Value = serde_json::from_str(&limited.body).unwrap();
        assert!(body["descriptors"][0].get("reason").is_none(), "{body}");

        redis.kill();
        // The store is down: every check of the fail-closed rule is denied, and each says
        // why (the first ones meet the failing store, the later ones the open circuit;
        // none is answered from the over-limit cache as if it were a limit).
        let bob = check_body("d", &[("login", "bob")]);
        for attempt in 0..6 {
            let a = server.post("/v1/check", &bob).await;
            assert_eq!(a.status, 429, "attempt {attempt}: {}", a.body);
            assert_eq!(a.header("x-weir-reason"), Some("store-unavailable"), "attempt {attempt}");
            let body: Value = serde_json::from_str(&a.body).unwrap();
            assert_eq!(body["descriptors"][0]["reason"], "store_unavailable", "{body}");
            assert_eq!(body["descriptors"][0]["code"], "OVER_LIMIT");
        }
        let json = r#"{"domain": "d", "descriptors": [{"entries": [{"key": "login", "value": "carol"}]}]}"#;
        let a = server.post("/json", json).await;
        assert_eq!(a.status, 429, "{}", a.body);
        assert_eq!(a.header("x-weir-reason"), Some("store-unavailable"));

        let mut grpc = server.grpc_client().await;
        let answer = grpc
            .should_rate_limit(request("d", vec![descriptor(&[("login", "dave")])]))
            .await
            .unwrap();
        assert_eq!(
            answer.metadata().get("x-weir-reason").map(|v| v.to_str().unwrap()),
            Some("store-unavailable")
        );
        assert_eq!(answer.into_inner().overall_code, EnvoyCode::OverLimit as i32);

        let metrics = server.get("/metrics").await.body;
        let count = |outcome: &str| {
            let needle = format!(r#"weir_decisions_total{{domain="d",rule="d.login",outcome="{outcome}"}} "#);
            metrics
                .lines()
                .find_map(|line| line.strip_prefix(needle.as_str()))
                .unwrap_or_else(|| panic!("no {needle}: {metrics}"))
                .trim()
                .parse::<u64>()
                .unwrap()
        };
        assert_eq!(count("denied"), 1, "the one real limit");
        assert_eq!(count("failed_closed"), 8, "six /v1/check, one /json, one gRPC");
        server.stop().await.unwrap();
    })
    .await;
}
