//! Concurrency (lease) rules through the server: `POST /v1/acquire` and `/v1/release` over
//! real sockets under a `ManualClock` (a lease's TTL runs out when the test advances the
//! clock), and gRPC's refusal of a lease rule with a message that points to them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, descriptor, request, settings, Scratch, TestServer};
use serde_json::{json, Value};

const RULES: &str = "\
domain: jobs
descriptors:
  - key: export
    rule:
      algorithm: concurrency
      max_leases: 2
  - key: user
    rule:
      algorithm: gcra
      rate: 10
      per: 1s
      burst: 10
";

fn lease(holder: &str, ttl_ms: Option<u64>) -> String {
    let mut body = json!({
        "domain": "jobs",
        "entries": [{"key": "export", "value": "acme"}],
        "holder": holder,
    });
    if let Some(ttl) = ttl_ms {
        body["ttl_ms"] = json!(ttl);
    }
    body.to_string()
}

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_acquired_refused_released_and_expire() {
    bounded(async {
        let dir = Scratch::new("lease");
        let (settings, clock) = settings(Some(&dir.write("jobs.yaml", RULES)));
        let server = TestServer::start(settings).await;

        for (holder, remaining) in [("a", 1), ("b", 0)] {
            let answer = server
                .post("/v1/acquire", &lease(holder, Some(30_000)))
                .await;
            assert_eq!(answer.status, 200, "{}", answer.body);
            let body = json(&answer.body);
            assert_eq!(body["acquired"], true);
            assert_eq!(body["rule"], "jobs.export");
            assert_eq!(
                (body["limit"].as_u64(), body["remaining"].as_u64()),
                (Some(2), Some(remaining))
            );
        }
        // Both leases taken: the third holder waits until the first one's TTL ends.
        let full = server.post("/v1/acquire", &lease("c", Some(30_000))).await;
        assert_eq!(full.status, 429, "{}", full.body);
        assert_eq!(json(&full.body)["acquired"], false);
        assert_eq!(json(&full.body)["retry_after_ms"], 30_000);
        assert_eq!(full.header("retry-after"), Some("30"));

        // Releasing frees a slot; releasing again says there was nothing to release.
        let released = server.post("/v1/release", &lease("a", None)).await;
        assert_eq!(
            json(&released.body),
            json!({"released": true, "rule": "jobs.export"})
        );
        let again = server.post("/v1/release", &lease("a", None)).await;
        assert_eq!(json(&again.body)["released"], false);
        assert_eq!(
            server
                .post("/v1/acquire", &lease("c", Some(10_000)))
                .await
                .status,
            200
        );

        // b's lease (30 s) outlives c's (10 s): after 10 s one slot is free again.
        clock.advance(Duration::from_secs(10));
        assert_eq!(
            server
                .post("/v1/acquire", &lease("d", Some(1_000)))
                .await
                .status,
            200
        );
        assert_eq!(
            server
                .post("/v1/acquire", &lease("e", Some(1_000)))
                .await
                .status,
            429
        );
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lease_requests_say_what_is_wrong() {
    bounded(async {
        let dir = Scratch::new("lease-bad");
        let (settings, _clock) = settings(Some(&dir.write("jobs.yaml", RULES)));
        let server = TestServer::start(settings).await;

        let no_ttl = server.post("/v1/acquire", &lease("a", None)).await;
        assert_eq!(no_ttl.status, 400);
        assert!(no_ttl.body.contains("ttl_ms"), "{}", no_ttl.body);

        let wrong_rule = json!({"domain": "jobs", "entries": [{"key": "user", "value": "u"}],
            "holder": "a", "ttl_ms": 1000});
        let answer = server.post("/v1/acquire", &wrong_rule.to_string()).await;
        assert_eq!(answer.status, 409);
        assert!(
            answer
                .body
                .contains("rule jobs.user is gcra, not concurrency"),
            "{}",
            answer.body
        );

        let long_holder = "h".repeat(300);
        let answer = server
            .post("/v1/acquire", &lease(&long_holder, Some(1000)))
            .await;
        assert_eq!(answer.status, 400, "{}", answer.body);

        // No rule matches: nothing limits it, and nothing is tracked.
        let unknown = json!({"domain": "nope", "entries": [{"key": "k", "value": "v"}],
            "holder": "a", "ttl_ms": 1000});
        let answer = server.post("/v1/acquire", &unknown.to_string()).await;
        assert_eq!(json(&answer.body), json!({"acquired": true, "rule": null}));

        // Counted under api="lease": three refused calls, one answered.
        let metrics = server.get("/metrics").await.body;
        for line in [
            r#"weir_requests_total{api="lease",result="invalid"} 3"#,
            r#"weir_requests_total{api="lease",result="ok"} 1"#,
        ] {
            assert!(metrics.contains(line), "missing {line}");
        }

        // A check on the lease rule is refused, pointing to the lease endpoints.
        let mut grpc = server.grpc_client().await;
        let status = grpc
            .should_rate_limit(request("jobs", vec![descriptor(&[("export", "acme")])]))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::FailedPrecondition);
        assert!(
            status.message().contains("POST /v1/acquire"),
            "{}",
            status.message()
        );
        server.stop().await.unwrap();
    })
    .await;
}
