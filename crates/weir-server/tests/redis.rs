//! The same gRPC and HTTP scenarios as on the memory store, against a real `redis-server`
//! (a throwaway process from `weir-testkit`), deciding on the test's manual clock; then the
//! store dies and the failover guard keeps deciding, which readiness and metrics report.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, envoy_readme_dir, scenarios, settings, TestServer};
use serde_json::Value;
use weir_server::{StoreClock, StoreSpec};
use weir_testkit::servers::RedisServer;

fn redis_settings(redis: &RedisServer) -> (weir_server::Settings, weir_core::ManualClock) {
    let (mut settings, clock) = settings(Some(&envoy_readme_dir()));
    settings.engine.store = StoreSpec::parse(&redis.url()).unwrap();
    settings.engine.store_clock = StoreClock::Process;
    (settings, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_readme_examples_on_redis() {
    let redis = RedisServer::start();
    bounded(async {
        let (settings, clock) = redis_settings(&redis);
        let server = TestServer::start(settings).await;
        scenarios::envoy_readme(&server, &clock).await;
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_check_on_redis() {
    let redis = RedisServer::start();
    bounded(async {
        let (settings, clock) = redis_settings(&redis);
        let server = TestServer::start(settings).await;
        scenarios::http_check(&server, &clock).await;
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_redis_falls_back_and_says_so() {
    let mut redis = RedisServer::start();
    bounded(async {
        let (settings, _clock) = redis_settings(&redis);
        let server = TestServer::start(settings).await;
        let body = check_body("internal", &[("azure", "tenant")]);
        assert_eq!(server.post("/v1/check", &body).await.status, 200);
        let ready: Value = serde_json::from_str(&server.get("/readyz").await.body).unwrap();
        assert_eq!(
            (ready["store"].clone(), ready["store_reachable"].clone()),
            ("redis".into(), true.into())
        );

        redis.kill();
        // Local fallback (the default policy) keeps deciding; the circuit opens.
        for _ in 0..5 {
            assert_eq!(server.post("/v1/check", &body).await.status, 200);
        }
        let a = server.get("/readyz").await;
        assert_eq!(a.status, 200, "the failure policy covers a dead store");
        let ready: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(ready["store_reachable"], false);
        assert_eq!(ready["mode"], "fallback");
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains(r#"weir_store_fallback{store="redis"} 1"#),
            "{metrics}"
        );
        assert!(
            metrics.contains("weir_store_errors_total{store=\"redis\""),
            "{metrics}"
        );
        server.stop().await.unwrap();
    })
    .await;
}
