//! Issue 10: a request's own `limit` override used to count on the configured rule's key,
//! and its fixed window replaced the rule's sliding log there: alternating one override
//! request with failed logins escaped the login lockout entirely. Overrides now count in
//! a key space of their own.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, settings, Scratch, TestServer};

const RULES: &str = "
domain: api
descriptors:
  - key: login_failures
    rule:
      algorithm: sliding_log
      limit: 3
      window: 1m
      lockout: {duration: 5m}
";

#[tokio::test]
async fn limit_overrides_cannot_reset_a_login_lockout() {
    bounded(async {
        let dir = Scratch::new("overrides");
        let rules = dir.write("rules.yaml", RULES);
        let (settings, _clock) = settings(Some(&rules));
        let server = TestServer::start(settings).await;
        let failure = check_body("api", &[("login_failures", "alice")]);
        let with_override = r#"{"domain": "api", "descriptors": [{"entries": [{"key": "login_failures", "value": "alice"}], "limit": {"requests_per_unit": 1000, "unit": "second"}}]}"#;
        let mut codes = Vec::new();
        for _ in 0..6 {
            codes.push(server.post("/v1/check", &failure).await.status);
            assert_eq!(server.post("/v1/check", with_override).await.status, 200);
        }
        assert_eq!(codes, [200, 200, 200, 429, 429, 429], "the lockout engaged and held");
        let locked = server.post("/v1/check", &failure).await;
        assert_eq!(locked.header("retry-after"), Some("300"));
        server.stop().await.unwrap();
    })
    .await;
}
