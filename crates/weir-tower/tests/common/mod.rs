//! What the example tests share: a manual clock, serving a router on a real socket
//! (127.0.0.1:0, with or without the peer's address) and one request per connection through
//! hyper's client.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // each test file uses a part

use std::net::SocketAddr;

use axum::Router;
use http::{Request, Response};
use http_body_util::BodyExt;
use weir_core::{Limiter, ManualClock, MemoryStore};

/// The manual clock's start (tests that count within one window never advance it past one).
pub const START_NS: u64 = 1_700_000_000_000_000_000;

/// A limiter on the memory store and a clock the test drives.
pub fn manual_limiter() -> (Limiter<MemoryStore, ManualClock>, ManualClock) {
    let clock = ManualClock::new(START_NS);
    (Limiter::new(MemoryStore::default(), clock.clone()), clock)
}

/// Serves `app` on a free loopback port: with the peer's address (`ConnectInfo`), as the
/// docs say to, or with plain `axum::serve` (no peer address).
pub async fn serve(app: Router, connect_info: bool) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        if connect_info {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .unwrap();
        } else {
            axum::serve(listener, app).await.unwrap();
        }
    });
    addr
}

/// `GET path` on a new connection, with `headers`; the body as text.
pub async fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Response<String> {
    send(addr, "GET", path, headers, "").await
}

/// `method path` with `headers` and `body` on a new connection (so axum uses a new clone
/// of the service each time); the response body as text.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response<String> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "test");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = sender
        .send_request(
            request
                .body(http_body_util::Full::new(bytes::Bytes::from(
                    body.to_string(),
                )))
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Response::from_parts(parts, String::from_utf8(body.to_vec()).unwrap())
}

/// A header's value, or "" when absent.
pub fn header<'a>(r: &'a Response<String>, name: &str) -> &'a str {
    r.headers().get(name).map_or("", |v| v.to_str().unwrap())
}

/// The statuses of `n` requests in a row.
pub async fn statuses(
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
    n: usize,
) -> Vec<u16> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(get(addr, path, headers).await.status().as_u16());
    }
    out
}

/// Waits (a bounded readiness loop, never a sleep) until `n` tasks sleep on `clock`.
pub async fn wait_for_sleepers(clock: &ManualClock, n: usize) {
    for _ in 0..10_000 {
        if clock.sleepers() >= n {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("expected {n} sleepers, found {}", clock.sleepers());
}
