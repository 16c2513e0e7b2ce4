//! What `weir proxy` tells the upstream about a request, end to end on real sockets (a
//! backend that records the headers it got): a client's own forwarding claims
//! (`X-Forwarded-Proto`, `X-Forwarded-Host`, `X-Real-IP`) are replaced by what the proxy
//! saw unless the client is a trusted proxy, whose are passed on; `Host` is kept.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{backend, client, get, proxy, settings, upstream};
use weir_tower::ClientIp;

/// A client claiming TLS, another host, address, port, prefix and path, and listing
/// `Host` as hop-by-hop.
const CLAIMS: [(&str, &str); 9] = [
    ("x-forwarded-proto", "https"),
    ("x-forwarded-host", "evil.example"),
    ("x-real-ip", "1.2.3.4"),
    ("x-forwarded-port", "8443"),
    ("x-forwarded-prefix", "/evil"),
    ("x-original-url", "/login"),
    ("x-rewrite-url", "/login"),
    ("connection", "host"),
    ("host", "example.test"),
];

/// Issue 10: an untrusted client's `X-Forwarded-Proto: https` was passed on as if the
/// proxy had seen TLS; `Connection: host` made the upstream see the proxy's address.
/// Issue 26: its `X-Forwarded-Host` and `X-Real-IP` were forwarded unchanged (a backend
/// building a password-reset link from `X-Forwarded-Host`, or logging `X-Real-IP`, took
/// them from anyone), and so was `X-Original-URL` (a backend routing by it served
/// `/login` to a request the proxy limited as `/`).
#[tokio::test]
async fn untrusted_forwarding_claims_are_replaced_and_host_is_kept() {
    let b = backend("app", Duration::ZERO).await;
    let p = proxy(settings(upstream(&b), "domain: proxy\n")).await;
    let a = get(&client(), p.addr, "/", &CLAIMS).await;
    assert_eq!(a.status, 200);
    let seen = b.record.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(seen["x-forwarded-proto"], "http");
    assert_eq!(seen["host"], "example.test");
    assert_eq!(seen["x-forwarded-host"], "example.test", "the Host it got");
    assert_eq!(seen["x-real-ip"], "127.0.0.1", "the peer it saw");
    assert_eq!(seen.get_all("x-real-ip").iter().count(), 1);
    assert_eq!(seen.get_all("x-forwarded-host").iter().count(), 1);
    for gone in [
        "x-forwarded-port",
        "x-forwarded-prefix",
        "x-original-url",
        "x-rewrite-url",
    ] {
        assert!(seen.get(gone).is_none(), "{gone} is not passed on");
    }
}

/// Behind a trusted balancer the claims are the balancer's: passed on as they came, and
/// `X-Real-IP` filled in, when it sent none, with the client it named in `X-Forwarded-For`.
#[tokio::test]
async fn a_trusted_proxys_forwarding_claims_are_passed_on() {
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), "domain: proxy\n");
    s.client_ip = ClientIp::new().trust("127.0.0.0/8".parse().unwrap());
    let p = proxy(s).await;
    let c = client();
    assert_eq!(get(&c, p.addr, "/", &CLAIMS).await.status, 200);
    let seen = b.record.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(seen["x-forwarded-proto"], "https");
    assert_eq!(seen["x-forwarded-host"], "evil.example");
    assert_eq!(seen["x-real-ip"], "1.2.3.4");
    assert_eq!(seen["x-original-url"], "/login");
    assert_eq!(seen["host"], "example.test");

    let behind = [("x-forwarded-for", "203.0.113.9"), ("host", "shop.example")];
    assert_eq!(get(&c, p.addr, "/", &behind).await.status, 200);
    let seen = b.record.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(seen["x-real-ip"], "203.0.113.9");
    assert_eq!(seen["x-forwarded-host"], "shop.example");
    assert_eq!(seen["x-forwarded-for"], "203.0.113.9, 127.0.0.1");
}
