//! Requests the proxy refuses before any limit or upstream sees them: no `Host` on
//! HTTP/1.1, two `Host` headers or an invalid one (RFC 9112 §3.2: 400; review finding 2),
//! and `CONNECT` (501: a reverse proxy is no tunnel; finding 3). Protocol upgrades such
//! as WebSocket (finding 4) are tunnelled: `websocket.rs`. An `h2c` upgrade offer is declined by ignoring it (RFC 9110 §7.8), as `curl --http2`
//! expects. Headers past the header limit are `weir serve`'s own `431` (the proxy's
//! listener has no router to apply it: the proxy does). Real sockets: a raw client, the
//! proxy, a recording backend.

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

    // HTTP/1.0 needs no Host: forwarded with the upstream's own name as its Host (the
    // upstream is spoken to in HTTP/1.1, which requires one); one valid Host is forwarded
    // as it came.
    let old = exchange(p.addr, b"GET / HTTP/1.0\r\n\r\n").await;
    assert_eq!((old.status, old.body.as_str()), (200, "app"));
    let seen = b.record.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(seen["host"], b.addr.to_string().as_str());
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

/// Request headers past `max_header_bytes` (16 KiB), yet within hyper's own bound (twice
/// that), are answered `431` in weir serve's words, counted, and never forwarded; headers
/// just within the limit go through. (Served without a router, the proxy applies the
/// limit itself: this fails if it does not.)
#[tokio::test]
async fn headers_past_the_limit_are_431_and_never_forwarded() {
    let (b, p) = open_proxy().await;
    let limit = weir_listen::Settings::default().max_header_bytes;
    let head = |value_len: usize| {
        let mut request = b"GET / HTTP/1.1\r\nhost: weir.test\r\nx-big: ".to_vec();
        request.extend(std::iter::repeat_n(b'a', value_len));
        request.extend_from_slice(b"\r\nconnection: close\r\n\r\n");
        request
    };
    // host (4 + 9), x-big (5 + n), connection (10 + 5): n = limit - 33 is exactly the limit.
    let within = exchange(p.addr, &head(limit - 33)).await;
    assert_eq!((within.status, within.body.as_str()), (200, "app"));
    assert_eq!(b.record.count(), 1);

    let past = exchange(p.addr, &head(limit - 32)).await;
    past.expect(431, "above the limit of");
    let well_past = exchange(p.addr, &head(limit + limit / 2)).await;
    well_past.expect(431, "above the limit of");
    assert_eq!(b.record.count(), 1, "nothing more reached the backend");

    let metrics = common::get(&common::client(), p.api, "/metrics", &[]).await;
    for counted in [
        r#"weir_requests_total{api="proxy",result="ok"} 1"#,
        r#"weir_requests_total{api="proxy",result="client_error"} 2"#,
    ] {
        assert!(metrics.body.contains(counted), "{}", metrics.body);
    }
}

/// The proxy's listener is bounded as weir serve's: past `max_connections`, a new
/// connection is closed at once (idle sockets used to exhaust file descriptors); open ones
/// keep being served, and a freed slot is used again.
#[tokio::test]
async fn the_listener_caps_its_connections() {
    use tokio::io::AsyncReadExt;

    let b = common::backend("app", std::time::Duration::ZERO).await;
    let mut s = common::settings(common::upstream(&b), "domain: proxy\n");
    s.server.max_connections = std::num::NonZeroUsize::new(2).unwrap();
    let p = common::proxy(s).await;

    // Two connections hold the two slots (a request head not yet finished).
    let mut first = common::raw::open(p.addr, b"GET / HTTP/1.1\r\nhost: a\r\n").await;
    let _second = common::raw::open(p.addr, b"GET / HTTP/1.1\r\nhost: a\r\n").await;
    // A third is closed as soon as it is accepted (EOF, or a reset), within a bound.
    let mut refused = false;
    for _ in 0..100 {
        let mut third = tokio::net::TcpStream::connect(p.addr).await.unwrap();
        let mut byte = [0u8; 1];
        match tokio::time::timeout(std::time::Duration::from_secs(2), third.read(&mut byte)).await {
            Ok(Ok(0) | Err(_)) => {
                refused = true;
                break;
            }
            // Not yet counted (the first two were still being accepted): try again.
            _ => tokio::task::yield_now().await,
        }
    }
    assert!(refused, "a connection past the cap was served");
    // An open one is still served.
    use tokio::io::AsyncWriteExt;
    first.write_all(b"connection: close\r\n\r\n").await.unwrap();
    let answer = common::raw::read_answer(&mut first).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "app"));
    drop(first);
    // Its slot is used again.
    let mut served = false;
    for _ in 0..200 {
        let Ok(mut again) = tokio::net::TcpStream::connect(p.addr).await else {
            continue;
        };
        let request = b"GET / HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n";
        if again.write_all(request).await.is_err() {
            continue;
        }
        let mut bytes = Vec::new();
        let read = tokio::time::timeout(
            std::time::Duration::from_secs(5),
            again.read_to_end(&mut bytes),
        )
        .await;
        if matches!(read, Ok(Ok(_))) && bytes.starts_with(b"HTTP/1.1 200") {
            served = true;
            break;
        }
        tokio::task::yield_now().await;
    }
    assert!(served, "a freed slot was not used again");
}
