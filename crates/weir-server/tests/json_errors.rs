//! Every error answer of the HTTP API is JSON in one shape, `{"error": "<what was wrong>"}`.
//! axum's own refusals were plain text (a body past the limit: `413 Failed to buffer the
//! request body`; a wrong method: an empty `405`; a bad query string: `400 Failed to
//! deserialize query string`), so a client parsing errors as JSON broke on exactly these.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, envoy_readme_dir, settings, TestServer};
use serde_json::Value;
use weir_server::{AdminToken, HttpAnswer};

const TOKEN: &str = "test-admin-token-0123456789";

/// The answer's `error` message, after checking that the answer is a JSON error.
fn error_of(answer: &HttpAnswer) -> String {
    assert_eq!(
        answer.header("content-type"),
        Some("application/json"),
        "{} {}",
        answer.status,
        answer.body
    );
    let v: Value = serde_json::from_str(&answer.body).unwrap();
    let object = v.as_object().unwrap();
    assert_eq!(object.len(), 1, "only `error`: {}", answer.body);
    object["error"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_the_limit_a_wrong_method_and_a_bad_query_string_are_json() {
    bounded(async {
        let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;

        let big = check_body("internal", &[("azure", &"x".repeat(70_000))]);
        for path in ["/v1/check", "/json", "/v1/acquire", "/admin/keys/inspect"] {
            let a = server.send("POST", path, Some(&big), Some(TOKEN)).await;
            assert_eq!(a.status, 413, "{path}");
            assert_eq!(
                error_of(&a),
                "the request body is larger than the limit of 65536 bytes",
                "{path}"
            );
        }

        let a = server.get("/v1/check").await;
        assert_eq!(a.status, 405);
        assert_eq!(a.header("allow"), Some("POST"));
        assert_eq!(
            error_of(&a),
            "GET is not allowed here (see the Allow header)"
        );
        let a = server.post("/healthz", "{}").await;
        assert_eq!(a.status, 405);
        assert!(error_of(&a).starts_with("POST is not allowed"));
        // Admin routes: the token is checked first, then the method.
        let a = server.send("GET", "/admin/reload", None, None).await;
        assert_eq!(a.status, 401);
        let a = server.send("GET", "/admin/reload", None, Some(TOKEN)).await;
        assert_eq!(a.status, 405);
        assert_eq!(a.header("allow"), Some("POST"));
        assert_eq!(
            error_of(&a),
            "GET is not allowed here (see the Allow header)"
        );

        let a = server
            .send("GET", "/admin/top-denied?limit=many", None, Some(TOKEN))
            .await;
        assert_eq!(a.status, 400);
        assert_eq!(
            error_of(&a),
            "invalid query string: limit: invalid digit found in string"
        );
        let a = server
            .send("GET", "/admin/top-denied?limit=2", None, Some(TOKEN))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);

        // Unknown paths were JSON already.
        let a = server.get("/v2/nothing").await;
        assert_eq!((a.status, error_of(&a).as_str()), (404, "no such endpoint"));
        server.stop().await.unwrap();
    })
    .await;
}
