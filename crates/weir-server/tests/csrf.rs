//! Issue 10: `/v1/check` accepted `text/plain` bodies, which any web page a user visits on
//! the internal network can POST cross-site without a preflight: it could spend clients'
//! budgets or lock accounts out. The state-changing endpoints now require JSON (415).
//! Also: a lease's `ttl_ms` has a maximum (it used to accept 2^64 − 1).
//!
//! Issue 26: `/json` (envoyproxy/ratelimit's, which must keep taking any content type from
//! its non-browser clients) still took them: seven no-cors `text/plain` POSTs from a page on
//! another origin locked an account out. Every request that can change state now refuses
//! what a browser sends cross-site (`Origin` not the server's, `Sec-Fetch-Site` not
//! `same-origin`): `403`, nothing charged; clients that send neither header are unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};
use weir_server::AdminToken;

/// A raw POST with the given `Content-Type` line (or none); the status code.
async fn post_as(server: &TestServer, path: &str, content_type: Option<&str>, body: &str) -> u16 {
    let mut stream = TcpStream::connect(server.http).await.unwrap();
    let ct = content_type.map_or(String::new(), |t| format!("content-type: {t}\r\n"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: x\r\n{ct}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer);
    text.split(' ').nth(1).unwrap().parse().unwrap()
}

/// A raw POST with `headers` (each a `name: value` line); the status and the body.
async fn post_with(server: &TestServer, path: &str, headers: &[&str], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(server.http).await.unwrap();
    let lines: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {}\r\n{lines}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        server.http,
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text.split(' ').nth(1).unwrap().parse().unwrap();
    let body = text
        .split_once("\r\n\r\n")
        .map_or(String::new(), |(_, b)| b.to_string());
    (status, body)
}

/// What Chromium sends with `fetch(url, {method: "POST", mode: "no-cors", body})` from a
/// page on http://evil.example (a `text/plain` body: no preflight).
const CHROMIUM_NO_CORS: [&str; 5] = [
    "origin: http://evil.example",
    "sec-fetch-site: cross-site",
    "sec-fetch-mode: no-cors",
    "sec-fetch-dest: empty",
    "content-type: text/plain;charset=UTF-8",
];

const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// Issue 26: seven cross-site no-cors POSTs to `/json` locked an account out (the first was
/// charged, the others denied). Now each is a 403 that charges nothing, on `/json`,
/// `/v1/check`, the leases and the admin API (even with the token); curl-like requests
/// (neither header) and the server's own origin are answered as before.
#[tokio::test]
async fn cross_site_browser_requests_spend_nothing_and_curl_is_unchanged() {
    bounded(async {
        let dir = Scratch::new("csrf-origin");
        let rules = dir.write("rules.yaml", &simple_rules("d", "user", 1, "hour"));
        let (mut settings, _clock) = settings(Some(&rules));
        settings.admin_token = Some(AdminToken::new(ADMIN_TOKEN).unwrap());
        let server = TestServer::start(settings).await;
        let json_body = r#"{"domain": "d", "descriptors": [{"entries": [{"key": "user", "value": "alice"}]}]}"#;
        for attempt in 0..7 {
            let (status, body) = post_with(&server, "/json", &CHROMIUM_NO_CORS, json_body).await;
            assert_eq!(status, 403, "attempt {attempt}: {body}");
            let error: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert!(
                error["error"].as_str().unwrap().contains("cross-site"),
                "{body}"
            );
        }
        let check = check_body("d", &[("user", "alice")]);
        let mut as_json = CHROMIUM_NO_CORS.to_vec();
        as_json[4] = "content-type: application/json";
        assert_eq!(post_with(&server, "/v1/check", &as_json, &check).await.0, 403);
        // Either header alone is enough (an older browser sends only Origin); same-site
        // (another port of this host) is refused too.
        let other_port = format!("origin: http://127.0.0.1:{}", server.grpc.port());
        for headers in [
            vec!["origin: http://evil.example"],
            vec!["sec-fetch-site: cross-site"],
            vec!["sec-fetch-site: same-site", other_port.as_str()],
            vec!["origin: null"],
        ] {
            assert_eq!(post_with(&server, "/json", &headers, json_body).await.0, 403, "{headers:?}");
        }
        let lease = r#"{"domain": "d", "entries": [{"key": "user", "value": "bob"}], "holder": "h", "ttl_ms": 1000}"#;
        assert_eq!(post_with(&server, "/v1/acquire", &as_json, lease).await.0, 403);
        let bearer = format!("authorization: Bearer {ADMIN_TOKEN}");
        let mut admin = as_json.clone();
        admin.push(&bearer);
        let block = r#"{"domain": "d", "entries": [{"key": "user", "value": "alice"}], "duration_ms": 60000}"#;
        assert_eq!(post_with(&server, "/admin/keys/block", &admin, block).await.0, 403);
        assert_eq!(post_with(&server, "/admin/reload", &admin, "").await.0, 403);

        // Nothing was charged or blocked: curl's first request is allowed, its second
        // denied, exactly as without the attack.
        let curl = ["user-agent: curl/8.5.0", "content-type: application/json"];
        let (status, body) = post_with(&server, "/json", &curl, json_body).await;
        assert_eq!(status, 200, "{body}");
        assert!(body.contains("\"overallCode\":\"OK\""), "{body}");
        assert_eq!(post_with(&server, "/json", &[], json_body).await.0, 429);
        // The server's own origin (its dashboard) is served.
        let own = format!("origin: http://{}", server.http);
        let bob = check_body("d", &[("user", "bob")]);
        let same_origin = [own.as_str(), "sec-fetch-site: same-origin", "content-type: application/json"];
        assert_eq!(post_with(&server, "/v1/check", &same_origin, &bob).await.0, 200);
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains(r#"weir_requests_total{api="json",result="invalid"} 11"#),
            "refusals are counted: {metrics}"
        );
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn cross_site_simple_requests_are_refused() {
    bounded(async {
        let dir = Scratch::new("csrf");
        let rules = dir.write("rules.yaml", &simple_rules("d", "user", 1, "hour"));
        let (settings, _clock) = settings(Some(&rules));
        let server = TestServer::start(settings).await;
        let body = check_body("d", &[("user", "alice")]);
        for simple in [
            Some("text/plain"),
            Some("application/x-www-form-urlencoded"),
            Some("multipart/form-data; boundary=x"),
            None,
        ] {
            assert_eq!(post_as(&server, "/v1/check", simple, &body).await, 415, "{simple:?}");
        }
        // None of them was counted: alice still has her one request.
        assert_eq!(post_as(&server, "/v1/check", Some("application/json; charset=utf-8"), &body).await, 200);
        assert_eq!(post_as(&server, "/v1/check", Some("application/json"), &body).await, 429);
        let lease = r#"{"domain": "d", "entries": [{"key": "user", "value": "bob"}], "holder": "h", "ttl_ms": 1000}"#;
        assert_eq!(post_as(&server, "/v1/acquire", Some("text/plain"), lease).await, 415);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test]
async fn a_lease_lifetime_has_a_maximum() {
    bounded(async {
        let dir = Scratch::new("lease-max");
        let rules = dir.write(
            "rules.yaml",
            "domain: d\ndescriptors:\n  - key: job\n    rule: {algorithm: concurrency, max_leases: 2}\n",
        );
        let (settings, _clock) = settings(Some(&rules));
        let server = TestServer::start(settings).await;
        let forever = r#"{"domain": "d", "entries": [{"key": "job", "value": "x"}], "holder": "h", "ttl_ms": 18446744073709551615}"#;
        let a = server.post("/v1/acquire", forever).await;
        assert_eq!(a.status, 400, "{}", a.body);
        assert!(a.body.contains("ttl_ms") && a.body.contains("maximum"), "{}", a.body);
        let hour = r#"{"domain": "d", "entries": [{"key": "job", "value": "x"}], "holder": "h", "ttl_ms": 3600000}"#;
        assert_eq!(server.post("/v1/acquire", hour).await.status, 200);
        server.stop().await.unwrap();
    })
    .await;
}
