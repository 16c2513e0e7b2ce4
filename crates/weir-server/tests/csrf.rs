//! Issue 10: `/v1/check` accepted `text/plain` bodies, which any web page a user visits on
//! the internal network can POST cross-site without a preflight: it could spend clients'
//! budgets or lock accounts out. The state-changing endpoints now require JSON (415).
//! Also: a lease's `ttl_ms` has a maximum (it used to accept 2^64 − 1).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};

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
