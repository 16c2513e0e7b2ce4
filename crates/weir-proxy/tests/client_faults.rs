//! A client's broken or stalled request body is the client's fault: `400` / `408`, logged
//! at DEBUG and counted as a client error, never a `502` / `504` with a WARN that blames
//! the upstream (review finding 1). Real sockets: a raw client, the proxy, a recording
//! backend.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::logs::Logs;
use common::raw::{exchange, open, read_answer};
use common::{backend, client, get, proxy, settings, upstream};
use tracing::Level;

/// No WARN line names the upstream (or says anything).
fn assert_no_warning(logs: &Logs) {
    let warnings = logs.at(Level::WARN);
    assert!(warnings.is_empty(), "{warnings:#?}");
}

/// The proxy's request counters, as `/metrics` shows them.
async fn proxy_requests(api: std::net::SocketAddr) -> Vec<String> {
    let metrics = get(&client(), api, "/metrics", &[]).await;
    metrics
        .body
        .lines()
        .filter(|l| l.starts_with(r#"weir_requests_total{api="proxy""#))
        .map(str::to_string)
        .collect()
}

#[tokio::test]
async fn bad_chunked_framing_in_the_request_body_is_the_clients_400_not_a_502() {
    let (logs, _guard) = Logs::capture();
    let b = backend("app", Duration::ZERO).await;
    let p = proxy(settings(upstream(&b), "domain: proxy\n")).await;
    // A chunk, then a chunk size that is not hexadecimal.
    let answer = exchange(
        p.addr,
        b"POST /upload HTTP/1.1\r\nhost: weir.test\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nmore\r\n0\r\n\r\n",
    )
    .await;
    answer.expect(400, "bad request body");
    assert!(answer.head.contains("connection: close"), "{}", answer.head);
    assert_no_warning(&logs);
    assert!(
        logs.at(Level::DEBUG)
            .iter()
            .any(|l| l.contains("the client's request body failed")),
        "{:#?}",
        logs.at(Level::DEBUG)
    );
    assert_eq!(
        proxy_requests(p.api).await,
        [r#"weir_requests_total{api="proxy",result="client_error"} 1"#]
    );
}

#[tokio::test]
async fn a_request_body_that_stalls_is_the_clients_408_not_a_504() {
    let (logs, _guard) = Logs::capture();
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), "domain: proxy\n");
    s.client_body_timeout = Duration::from_millis(1500);
    // Shorter than the client's allowance on purpose: while the proxy waits for the
    // client's body, the upstream's clock does not run (it only has to connect in 1 s).
    s.upstream_timeout = Duration::from_secs(1);
    let p = proxy(s).await;
    // 10 bytes promised, 4 sent, then nothing (the connection stays open).
    let mut stream = open(
        p.addr,
        b"POST /upload HTTP/1.1\r\nhost: weir.test\r\ncontent-length: 10\r\n\r\nhalf",
    )
    .await;
    let answer = read_answer(&mut stream).await;
    answer.expect(408, "the request body stalled");
    assert!(answer.head.contains("connection: close"), "{}", answer.head);
    assert_no_warning(&logs);
    assert_eq!(
        proxy_requests(p.api).await,
        [r#"weir_requests_total{api="proxy",result="client_error"} 1"#]
    );
}
