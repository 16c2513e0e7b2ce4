//! Hits above a rule's capacity can never pass, however long the client waits. They were
//! answered `429` with `Retry-After: 0` (the key's reset: nothing to reset on a fresh key),
//! so a client honouring it retried at once, in a loop. Now:
//! - `/v1/check`: `429` without `Retry-After`, the descriptor marked `never_allowed: true`
//!   and no `retry_after_ms`; the `RateLimit` header's `t` is never 0;
//! - gRPC and `/json` keep envoyproxy/ratelimit's answer, `OVER_LIMIT` (its protocol cannot
//!   say "never"), with `duration_until_reset` the key's reset as ratelimit computes it for
//!   a fixed window, or the rule's whole window when the key has nothing to reset: never 0,
//!   so Envoy's `X-RateLimit-Reset` does not invite an immediate retry either.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use serde_json::{json, Value};

use common::{bounded, descriptor, request, settings, Scratch, TestServer};

const RULES: &str = "\
domain: d
descriptors:
  - key: ip
    rule: {algorithm: gcra, rate: 20, per: 1s, burst: 40}
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 5}
";

fn check(entries: Value, hits: u64) -> String {
    json!({"domain": "d", "descriptors": [{"entries": entries}], "hits": hits}).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_above_the_capacity_are_never_allowed_and_not_retried_at_once() {
    bounded(async {
        let dir = Scratch::new("above-capacity");
        let rules = dir.write("rules.yaml", RULES);
        let (settings, _clock) = settings(Some(&rules));
        let server = TestServer::start(settings).await;

        // A fresh GCRA key (nothing to reset) asked for 41 when at most 40 can ever pass.
        let ip = json!([{"key": "ip", "value": "10.0.0.1"}]);
        let a = server.post("/v1/check", &check(ip.clone(), 41)).await;
        assert_eq!(a.status, 429, "{}", a.body);
        assert_eq!(a.header("retry-after"), None, "no retry can pass");
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["overall_code"], "OVER_LIMIT");
        let d = &v["descriptors"][0];
        assert_eq!(d["never_allowed"], true, "{}", a.body);
        assert_eq!(d["limit"], 40);
        assert!(d.get("retry_after_ms").is_none(), "{}", a.body);
        // The live state says when the rule next resets, never "now": its window, the 2 s a
        // burst of 40 takes to refill at 20 per second.
        assert_eq!(a.header("ratelimit"), Some(r#""d.ip";r=40;t=2"#));
        // Nothing was spent: a request that fits passes, and is not marked.
        let a = server.post("/v1/check", &check(ip, 40)).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert!(v["descriptors"][0].get("never_allowed").is_none());

        // A request that could pass later still gets its Retry-After.
        let user = json!([{"key": "user", "value": "alice"}]);
        assert_eq!(server.post("/v1/check", &check(user.clone(), 5)).await.status, 200);
        let a = server.post("/v1/check", &check(user.clone(), 1)).await;
        assert_eq!(a.status, 429);
        assert_eq!(a.header("retry-after"), Some("60"));
        // And one that cannot, on the same key, does not.
        let a = server.post("/v1/check", &check(user, 6)).await;
        assert_eq!(a.status, 429);
        assert_eq!(a.header("retry-after"), None);

        // gRPC: OVER_LIMIT, as envoyproxy/ratelimit answers it, and a reset that is not 0.
        let mut rls = server.grpc_client().await;
        let mut r = request("d", vec![descriptor(&[("ip", "10.0.0.2")])]);
        r.hits_addend = 41;
        let answer = rls.should_rate_limit(r).await.unwrap().into_inner();
        assert_eq!(answer.overall_code, Code::OverLimit as i32);
        let s = &answer.statuses[0];
        assert_eq!(s.code, Code::OverLimit as i32);
        assert_eq!(s.limit_remaining, 0);
        let whole_window = ProtoDuration {
            seconds: 2,
            nanos: 0,
        };
        assert_eq!(s.duration_until_reset, Some(whole_window));
        // A fixed window: its end, as ratelimit's CalculateReset (the minute just began).
        let mut r = request("d", vec![descriptor(&[("user", "bob")])]);
        r.hits_addend = 6;
        let answer = rls.should_rate_limit(r).await.unwrap().into_inner();
        assert_eq!(answer.overall_code, Code::OverLimit as i32);
        let minute = ProtoDuration {
            seconds: 60,
            nanos: 0,
        };
        assert_eq!(answer.statuses[0].duration_until_reset, Some(minute));

        // /json: the same message in protobuf JSON.
        let body = r#"{"domain": "d", "descriptors": [{"entries": [{"key": "ip", "value": "10.0.0.3"}]}], "hitsAddend": 41}"#;
        let a = server.post("/json", body).await;
        assert_eq!(a.status, 429);
        assert_eq!(a.header("retry-after"), None);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["overallCode"], "OVER_LIMIT");
        assert_eq!(v["statuses"][0]["durationUntilReset"], "2s", "{}", a.body);
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}
