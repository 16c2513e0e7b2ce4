//! The three-line quick start (`RateLimitLayer::per_ip`, as `examples/per_ip.rs` and the
//! README write it) on real sockets: each client IP limited, with the headers; and served
//! without the peer's address (plain `axum::serve`), refused — never let through unlimited.

#![cfg(feature = "axum")] // reads the peer address the way axum records it
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::{routing::get, Router};
use common::{header, manual_limiter, serve, statuses};
use weir_core::Rule;
use weir_tower::RateLimitLayer;

#[tokio::test]
async fn per_ip_limits_each_client_in_three_lines() {
    let (limiter, _clock) = manual_limiter();
    let rule = Rule::fixed_window(3, Duration::from_secs(60)).unwrap();

    let layer = RateLimitLayer::per_ip_with(limiter, rule).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "hello" }))
        .layer(layer);
    let addr = serve(app, true).await;

    let ok = common::get(addr, "/", &[]).await;
    assert_eq!(ok.status(), 200);
    assert_eq!(header(&ok, "ratelimit-policy"), r#""per_ip";q=3;w=60"#);
    assert_eq!(statuses(addr, "/", &[], 3).await, [200, 200, 429]);
    let denied = common::get(addr, "/", &[]).await;
    assert_eq!(denied.status(), 429);
    let retry: u64 = header(&denied, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "retry-after {retry}");
    assert_eq!(
        header(&denied, "ratelimit"),
        format!(r#""per_ip";r=0;t={retry}"#)
    );
}

/// issue 13: a key that cannot be built (the peer's address under plain `axum::serve`) is
/// a clear `503`, not "no limit" — on the shortcut's path too.
#[tokio::test]
async fn the_quick_start_without_the_peer_address_refuses_rather_than_lets_through() {
    let (limiter, _clock) = manual_limiter();
    let calls = Arc::new(AtomicUsize::new(0));
    let handler = {
        let calls = Arc::clone(&calls);
        move || async move {
            calls.fetch_add(1, Ordering::SeqCst);
            "hello"
        }
    };
    let layer = RateLimitLayer::per_ip_with(limiter, Rule::per_second(1_000).unwrap()).unwrap();
    let app = Router::new().route("/", get(handler)).layer(layer);
    let addr = serve(app, false).await;

    assert_eq!(statuses(addr, "/", &[], 3).await, [503, 503, 503]);
    let refused = common::get(addr, "/", &[]).await;
    let body: serde_json::Value = serde_json::from_str(refused.body()).unwrap();
    assert_eq!(body["error"], "rate limiter unavailable");
    assert_eq!(header(&refused, "retry-after"), "1");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        0,
        "no request reached the handler"
    );
}

#[test]
fn a_concurrency_rule_is_not_a_rate_limit() {
    let e = RateLimitLayer::per_ip(Rule::concurrency(3).unwrap()).unwrap_err();
    assert!(e.to_string().contains("max_in_flight"), "{e}");
}
