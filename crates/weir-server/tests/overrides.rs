//! A request's own `limit` (Envoy's `RateLimitOverride`), over real sockets.
//!
//! - Issue 10: an override used to count on the configured rule's key, and its fixed window
//!   replaced the rule's sliding log there: alternating one override request with failed
//!   logins escaped the login lockout entirely. Overrides count in a key space of their own.
//! - Issue 26: an override still lifted a lockout and an admin block (the configured rule's
//!   record was never looked at): the configured rule's guard now holds on `/v1/check`,
//!   `/json` and gRPC. A stream of overrides for new keys (1 per year, month, week: each
//!   set of parameters was a rule of its own, with half the store) filled the memory store
//!   for good, so every new key got a 503 and `/readyz` went 503: overrides now hold one
//!   small share. `--limit-overrides deny` refuses them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::net::SocketAddr;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weir_server::{AdminToken, LimitOverrides, StoreSpec};

use common::{bounded, check_body, descriptor, request, settings, Scratch, TestServer};

const RULES: &str = "
domain: api
descriptors:
  - key: login_failures
    rule:
      algorithm: sliding_log
      limit: 3
      window: 1m
      lockout: {duration: 5m}
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 100}
  - key: banned
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: user_id
    rate_limit: {unit: hour, requests_per_unit: 100}
";

const TOKEN: &str = "test-admin-token-0123456789";

/// A `/v1/check` body for one descriptor carrying a limit override.
fn override_body(key: &str, value: &str, per_unit: u64, unit: &str) -> String {
    json!({"domain": "api", "descriptors": [{
        "entries": [{"key": key, "value": value}],
        "limit": {"requests_per_unit": per_unit, "unit": unit}
    }]})
    .to_string()
}

/// The same for `/json` (envoyproxy/ratelimit's field names).
fn override_json(key: &str, value: &str) -> String {
    json!({"domain": "api", "descriptors": [{
        "entries": [{"key": key, "value": value}],
        "limit": {"requestsPerUnit": 1000, "unit": "SECOND"}
    }]})
    .to_string()
}

/// A gRPC request for one descriptor carrying an override of 1000 a second.
fn override_rls(
    key: &str,
    value: &str,
) -> envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest {
    let mut d = descriptor(&[(key, value)]);
    d.limit = Some(RateLimitOverride {
        requests_per_unit: 1000,
        unit: Unit::Second as i32,
    });
    request("api", vec![d])
}

#[tokio::test]
async fn limit_overrides_cannot_reset_a_login_lockout() {
    bounded(async {
        let dir = Scratch::new("overrides");
        let rules = dir.write("rules.yaml", RULES);
        let (settings, _clock) = settings(Some(&rules));
        let server = TestServer::start(settings).await;
        let failure = check_body("api", &[("login_failures", "alice")]);
        let with_override = override_body("login_failures", "alice", 1000, "second");
        let (mut codes, mut overridden) = (Vec::new(), Vec::new());
        for _ in 0..6 {
            codes.push(server.post("/v1/check", &failure).await.status);
            overridden.push(server.post("/v1/check", &with_override).await.status);
        }
        assert_eq!(
            codes,
            [200, 200, 200, 429, 429, 429],
            "the lockout engaged and held"
        );
        assert_eq!(
            overridden,
            [200, 200, 200, 429, 429, 429],
            "the override decided until the lockout, which it did not lift (issue 26)"
        );
        let locked = server.post("/v1/check", &failure).await;
        assert_eq!(locked.header("retry-after"), Some("300"));
        server.stop().await.unwrap();
    })
    .await;
}

/// Issue 26: a locked-out account, an address under an admin block and a
/// `requests_per_unit: 0` key answer over the limit whatever limit the request names, on
/// every API that takes overrides; the configured rule is never charged by them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_override_never_lifts_a_lockout_a_block_or_a_deny() {
    bounded(async {
        let dir = Scratch::new("overrides-guard");
        let rules = dir.write("rules.yaml", RULES);
        let (mut settings, clock) = settings(Some(&rules));
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;
        let mut rls = server.grpc_client().await;

        // Locked out: the fourth failure within the minute locks alice for 5 minutes.
        let failure = check_body("api", &[("login_failures", "alice")]);
        for expected in [200, 200, 200, 429] {
            assert_eq!(server.post("/v1/check", &failure).await.status, expected);
        }
        // Blocked by an operator for 10 minutes.
        let block = json!({"domain": "api", "entries": [{"key": "remote_address", "value": "10.0.0.1"}], "duration_ms": 600_000});
        let blocked = server
            .send(
                "POST",
                "/admin/keys/block",
                Some(&block.to_string()),
                Some(TOKEN),
            )
            .await;
        assert_eq!(blocked.status, 200, "{}", blocked.body);

        for (key, value, retry_after) in [
            ("login_failures", "alice", Some("300")),
            ("remote_address", "10.0.0.1", Some("600")),
            ("banned", "x", Some("1")),
        ] {
            let a = server
                .post("/v1/check", &override_body(key, value, 1000, "second"))
                .await;
            assert_eq!(a.status, 429, "/v1/check {key}: {}", a.body);
            assert_eq!(a.header("retry-after"), retry_after, "{key}");
            let a = server.post("/json", &override_json(key, value)).await;
            assert_eq!(a.status, 429, "/json {key}: {}", a.body);
            let v: Value = serde_json::from_str(&a.body).unwrap();
            assert_eq!(v["overallCode"], "OVER_LIMIT", "/json {key}");
            let r = rls
                .should_rate_limit(override_rls(key, value))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(r.overall_code, Code::OverLimit as i32, "gRPC {key}");
        }

        // Another account, another address: the override decides, as upstream.
        for (key, value) in [("login_failures", "carol"), ("remote_address", "10.0.0.2")] {
            let a = server
                .post("/v1/check", &override_body(key, value, 1000, "second"))
                .await;
            assert_eq!(a.status, 200, "{key}: {}", a.body);
            let r = rls
                .should_rate_limit(override_rls(key, value))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(r.overall_code, Code::Ok as i32, "gRPC {key}");
        }
        // The guard was read, never charged: carol's configured record holds nothing.
        let inspect = json!({"domain": "api", "entries": [{"key": "login_failures", "value": "carol"}]});
        let a = server
            .send(
                "POST",
                "/admin/keys/inspect",
                Some(&inspect.to_string()),
                Some(TOKEN),
            )
            .await;
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["used"], 0, "{v}");

        // Once the lockout is over, alice's override decides again.
        clock.advance(std::time::Duration::from_secs(301));
        let a = server
            .post(
                "/v1/check",
                &override_body("login_failures", "alice", 1000, "second"),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

/// One HTTP/1.1 connection sending `bodies` to `/v1/check`, pipelined in batches, and the
/// status of each answer in order (no sleeps: each batch is written, then its answers read).
async fn pipelined(addr: SocketAddr, bodies: Vec<String>) -> Vec<u16> {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let mut statuses = Vec::with_capacity(bodies.len());
    let mut buffer = Vec::new();
    for batch in bodies.chunks(64) {
        let mut out = Vec::new();
        for body in batch {
            out.extend_from_slice(
                format!(
                    "POST /v1/check HTTP/1.1\r\nhost: weir\r\ncontent-type: application/json\r\n\
                     content-length: {}\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
        stream.write_all(&out).await.unwrap();
        for _ in batch {
            statuses.push(read_answer(&mut stream, &mut buffer).await);
        }
    }
    statuses
}

/// Reads one answer (status line, headers, a `content-length` body) off `stream`.
async fn read_answer(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> u16 {
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let status: u16 = head[9..12].parse().unwrap();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .map_or(0, |v| v.trim().parse().unwrap());
            let total = end + 4 + length;
            if buffer.len() >= total {
                buffer.drain(..total);
                return status;
            }
        }
        let mut chunk = [0u8; 16 * 1024];
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the server closed the connection mid-answer");
        buffer.extend_from_slice(&chunk[..n]);
    }
}

/// Issue 26 (HIGH): 30 000 requests, each a new `user_id` with an override of 1 per year,
/// month or week (three rules as the store used to count them, each with half of it),
/// into a store of 20 000 keys. The overrides hold their own share (10 %, the rest of their
/// new keys refused with a 503 saying so); a new client under a configured rule is still
/// admitted and `/readyz` stays 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_overrides_for_new_keys_never_fills_the_store() {
    bounded(async {
        let dir = Scratch::new("overrides-flood");
        let rules = dir.write("rules.yaml", RULES);
        let (mut settings, _clock) = settings(Some(&rules));
        settings.engine.store = StoreSpec::Memory { capacity: 20_000 };
        let server = TestServer::start(settings).await;
        let units = ["year", "month", "week"];
        let clients: Vec<_> = (0..4)
            .map(|c| {
                let bodies: Vec<String> = (0..7_500)
                    .map(|i| {
                        let n = c * 7_500 + i;
                        override_body("user_id", &format!("flood-{n}"), 1, units[n % 3])
                    })
                    .collect();
                tokio::spawn(pipelined(server.http, bodies))
            })
            .collect();
        let mut admitted = 0;
        let mut refused = 0;
        for client in clients {
            for status in client.await.unwrap() {
                match status {
                    200 => admitted += 1,
                    503 => refused += 1,
                    other => panic!("an override answered {other}"),
                }
            }
        }
        assert_eq!(admitted + refused, 30_000);
        assert!(
            admitted <= 2_000 + 64,
            "the overrides hold at most their share: {admitted} admitted"
        );
        let why = server
            .post(
                "/v1/check",
                &override_body("user_id", "one-more", 1, "year"),
            )
            .await;
        assert_eq!(why.status, 503);
        assert!(
            why.body.contains("limit overrides' share"),
            "the refusal says why: {}",
            why.body
        );
        assert!(
            why.header("retry-after").is_none(),
            "no invented Retry-After"
        );

        // Fresh clients under configured rules are admitted; the server stays ready.
        for i in 0..50 {
            let fresh = check_body("api", &[("user_id", &format!("client-{i}"))]);
            let a = server.post("/v1/check", &fresh).await;
            assert_eq!(a.status, 200, "fresh client {i}: {}", a.body);
        }
        let ready = server.get("/readyz").await;
        assert_eq!(ready.status, 200, "{}", ready.body);
        let stats = server.app.engine().store().memory().unwrap().stats();
        assert_eq!(stats.len, admitted + 50, "{stats:?}");
        server.stop().await.unwrap();
    })
    .await;
}

/// `--limit-overrides deny`: a request carrying an override is refused on every API,
/// naming the option; requests without one are decided as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limit_overrides_deny_refuses_them_on_every_api() {
    bounded(async {
        let dir = Scratch::new("overrides-deny");
        let rules = dir.write("rules.yaml", RULES);
        let (mut settings, _clock) = settings(Some(&rules));
        settings.engine.limit_overrides = LimitOverrides::Deny;
        let server = TestServer::start(settings).await;
        let a = server
            .post("/v1/check", &override_body("user_id", "u1", 1000, "second"))
            .await;
        assert_eq!(a.status, 400, "{}", a.body);
        assert!(a.body.contains("--limit-overrides deny"), "{}", a.body);
        assert!(a.body.contains("descriptors[0].limit"), "{}", a.body);
        let a = server.post("/json", &override_json("user_id", "u1")).await;
        assert_eq!(a.status, 400, "{}", a.body);
        assert!(a.body.contains("--limit-overrides deny"), "{}", a.body);
        let mut rls = server.grpc_client().await;
        let status = rls
            .should_rate_limit(override_rls("user_id", "u1"))
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        assert!(
            status.message().contains("--limit-overrides deny"),
            "{}",
            status.message()
        );
        // Without an override: decided as usual.
        let plain = check_body("api", &[("user_id", "u1")]);
        assert_eq!(server.post("/v1/check", &plain).await.status, 200);
        let r = rls
            .should_rate_limit(request("api", vec![descriptor(&[("user_id", "u1")])]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(r.overall_code, Code::Ok as i32);
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}
