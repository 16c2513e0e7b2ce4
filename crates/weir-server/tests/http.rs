//! The HTTP API over real sockets: `/v1/check` with its headers and 429, envoyproxy/
//! ratelimit's `/json`, bad input answered 400 with what was wrong, health, readiness, and
//! a graceful stop.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, envoy_readme_dir, scenarios, settings, TestServer};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_answers_with_headers_and_429_when_over() {
    bounded(async {
        let (settings, clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        scenarios::http_check(&server, &clock).await;
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_400_that_says_what_was_wrong() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        let too_many: Vec<Value> = (0..65)
            .map(|_| json!({"entries": [{"key": "a", "value": "b"}]}))
            .collect();
        let cases = [
            ("{not json", "invalid JSON: key must be a string at line 1 column 2"),
            (
                r#"{"domain": "d", "descriptors": [{"entries": [{"key": "a", "value": 5}]}]}"#,
                "invalid JSON at descriptors[0].entries[0].value: invalid type: integer `5`, expected a string at line 1 column 68",
            ),
            (
                r#"{"domain": "d", "descriptors": [], "hits": -1}"#,
                "invalid JSON at hits: invalid value: integer `-1`, expected u64 at line 1 column 45",
            ),
            (
                r#"{"domain": "d", "descriptors": [], "extra": 1}"#,
                "invalid JSON at extra: unknown field `extra`, expected one of `domain`, `descriptors`, `hits`, `hits_addend` at line 1 column 42",
            ),
            (
                r#"{"domain": "", "descriptors": [{"entries": []}]}"#,
                "rate limit domain must not be empty",
            ),
            (
                r#"{"domain": "internal", "descriptors": []}"#,
                "rate limit descriptor list must not be empty",
            ),
            (
                r#"{"domain": "internal", "hits": 2000000000, "descriptors": [{"entries": [{"key": "azure", "value": "x"}]}]}"#,
                "hits_addend is 2000000000, above the maximum of 1000000000",
            ),
            (
                &json!({"domain": "internal", "descriptors": too_many}).to_string(),
                "65 descriptors, above the maximum of 64",
            ),
            (
                r#"{"domain": "internal", "descriptors": [{"entries": [{"key": "azure", "value": "x"}], "limit": {"requests_per_unit": 5, "unit": "fortnight"}}]}"#,
                "descriptors[0].limit.unit: 'fortnight' is not one of second, minute, hour, day, week, month, year",
            ),
        ];
        for (body, message) in cases {
            let a = server.post("/v1/check", body).await;
            assert_eq!(a.status, 400, "{body}");
            let v: Value = serde_json::from_str(&a.body).unwrap();
            assert_eq!(v["error"], message, "{body}");
        }
        // Bodies above 64 KiB are refused before they are read.
        let big = check_body("internal", &[("azure", &"x".repeat(70_000))]);
        assert_eq!(server.post("/v1/check", &big).await.status, 413);
        // Unknown paths and methods.
        assert_eq!(server.get("/v2/nothing").await.status, 404);
        assert_eq!(server.get("/v1/check").await.status, 405);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_endpoint_speaks_envoyproxy_ratelimit_protojson() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        // The example from envoyproxy/ratelimit's source, in both field-name styles.
        let body = r#"{"domain": "internal", "descriptors": [{"entries": [{"key": "azure"}]}], "hitsAddend": "2"}"#;
        let a = server.post("/json", body).await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(a.header("content-type"), Some("application/json"));
        assert_eq!(
            serde_json::from_str::<Value>(&a.body).unwrap(),
            json!({
                "overallCode": "OK",
                "statuses": [{
                    "code": "OK",
                    "currentLimit": {"requestsPerUnit": 100, "unit": "MINUTE"},
                    "limitRemaining": 98,
                    "durationUntilReset": "60s"
                }]
            }),
            "no responseHeadersToAdd unless asked, as envoyproxy/ratelimit"
        );
        let blocked = r#"{"domain": "edge_proxy_per_ip", "descriptors": [{"entries": [{"key": "remote_address", "value": "50.0.0.5"}]}]}"#;
        let a = server.post("/json", blocked).await;
        assert_eq!(a.status, 429);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["overallCode"], "OVER_LIMIT");
        assert_eq!(v["statuses"][0]["currentLimit"], json!({"unit": "SECOND"}));
        assert!(v["statuses"][0].get("limitRemaining").is_none(), "zero is left out");
        let unlimited = r#"{"domain": "internal", "descriptors": [{"entries": [{"key": "ldap", "value": "x"}]}]}"#;
        let v: Value = serde_json::from_str(&server.post("/json", unlimited).await.body).unwrap();
        assert_eq!(v["statuses"][0], json!({"code": "OK", "limitRemaining": 4_294_967_295u32}));

        let bad = server.post("/json", r#"{"domain": "internal", "descriptors": [{"entries": [{"key": "a", "valu": "b"}]}]}"#).await;
        assert_eq!(bad.status, 400);
        assert!(bad.body.starts_with("Bad Request: invalid JSON at descriptors[0].entries[0].valu: unknown field `valu`"), "{}", bad.body);
        let empty = server.post("/json", r#"{"domain": "internal"}"#).await;
        assert_eq!(empty.status, 400);
        assert_eq!(empty.body, "Bad Request: rate limit descriptor list must not be empty\n");
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_the_default_example_rules() {
    bounded(async {
        let (settings, _clock) = settings(None); // no --config: the documented example
        let server = TestServer::start(settings).await;
        let health = server.get("/healthz").await;
        assert_eq!((health.status, health.body.as_str()), (200, "ok\n"));
        let ready = server.get("/readyz").await;
        assert_eq!(ready.status, 200);
        let v: Value = serde_json::from_str(&ready.body).unwrap();
        assert_eq!(v["ready"], true);
        assert_eq!(v["store"], "memory");
        let a = server
            .post(
                "/v1/check",
                &check_body("api", &[("remote_address", "10.0.0.1")]),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["descriptors"][0]["limit"], 40);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn router_answers_without_a_socket() {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt as _;

    bounded(async {
        let (settings, _clock) = settings(None);
        let app = weir_server::App::new(settings).await.unwrap();
        let response = weir_server::router(app)
            .oneshot(Request::get("/healthz").body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
    })
    .await;
}
