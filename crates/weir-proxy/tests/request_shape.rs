//! Requests the proxy refuses before any limit or upstream sees them: no `Host` on
//! HTTP/1.1, two `Host` headers or an invalid one (RFC 9112 §3.2: 400; review finding 2),
//! `CONNECT` (501: a reverse proxy is no tunnel; finding 3), and protocol upgrades such as
//! WebSocket (501, until the shared accept loop can hand over a connection; finding 4).
//! An `h2c` upgrade offer is declined by ignoring it (RFC 9110 §7.8), as `curl --http2`
//! expects. Real sockets: a raw client, the proxy, a recording backend.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::open_proxy;
use common::raw::exchange;

#[tokio::test]
async fn a_missing_duplicated_or_invalid_host_is_400_and_never_forwarded() {
    let (b, p) = open_proxy().await;

    let none = exchange(p.addr, b"GET / HTTP/1.1\r\nx-probe: 1\r\n\r\n").await;
    none.expect(400, "needs a Host header");

    let two = exchange(
        p.addr,
        b"GET / HTTP/1.1\r\nhost: a.example\r\nhost: b.example\r\n\r\n",
    )
    .await;
    two.expect(400, "more than one Host header");

    for bad in [
        &b"a b.example"[..],
        b"user@a.example",
        b"a.example/path",
        b"",
    ] {
        let mut request = b"GET / HTTP/1.1\r\nhost: ".to_vec();
        request.extend_from_slice(bad);
        request.extend_from_slice(b"\r\n\r\n");
        let answer = exchange(p.addr, &request).await;
        assert_eq!(
            answer.status,
            400,
            "{:?}: {answer:?}",
            String::from_utf8_lossy(bad)
        );
        assert!(answer.body.contains("not a valid host"), "{}", answer.body);
    }
    assert_eq!(b.record.count(), 0, "nothing reached the backend");

    // HTTP/1.0 needs no Host; one valid Host is forwarded as it came.
    let old = exchange(p.addr, b"GET / HTTP/1.0\r\n\r\n").await;
    assert_eq!((old.status, old.body.as_str()), (200, "app"));
    let one = exchange(
        p.addr,
        b"GET / HTTP/1.1\r\nhost: a.example:8080\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!((one.status, one.body.as_str()), (200, "app"));
    let seen = b.record.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(seen["host"], "a.example:8080");
    assert_eq!(b.record.count(), 2);
}

#[tokio::test]
async fn connect_is_refused_with_501_and_never_forwarded() {
    let (b, p) = open_proxy().await;
    let answer = exchange(
        p.addr,
        b"CONNECT internal.example:22 HTTP/1.1\r\nhost: internal.example:22\r\n\r\n",
    )
    .await;
    answer.expect(501, "CONNECT is not supported");
    assert_eq!(b.record.count(), 0, "nothing reached the backend");
}

#[tokio::test]
async fn a_websocket_upgrade_is_refused_with_501_not_turned_into_a_plain_get() {
    let (b, p) = open_proxy().await;
    let answer = exchange(
        p.addr,
        b"GET /chat HTTP/1.1\r\nhost: weir.test\r\nconnection: Upgrade\r\nupgrade: websocket\r\n\
sec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    )
    .await;
    answer.expect(501, "upgrades are not supported");
    assert_eq!(b.record.count(), 0, "nothing reached the backend");
}

#[tokio::test]
async fn an_h2c_upgrade_offer_is_declined_and_the_request_served_over_http_1_1() {
    let (b, p) = open_proxy().await;
    // What `curl --http2 http://…` sends.
    let answer = exchange(
        p.addr,
        b"GET / HTTP/1.1\r\nhost: weir.test\r\nconnection: Upgrade, HTTP2-Settings\r\n\
upgrade: h2c\r\nhttp2-settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n",
    )
    .await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "app"));
    let seen = b.record.last_headers.lock().unwrap().clone().unwrap();
    assert!(seen.get("upgrade").is_none() && seen.get("http2-settings").is_none());
}
