//! `examples/custom_429.rs` on real sockets: a browser over the limit gets the example's
//! page, with `Retry-After` and the rate-limit headers the layer adds; an API client gets
//! the layer's JSON. A handler's own headers are kept, not overwritten.

#![cfg(feature = "axum")] // reads the peer address the way axum records it
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;
#[path = "../examples/custom_429.rs"]
#[allow(dead_code)]
mod custom_429;

use std::time::Duration;

use axum::{routing::get, Router};
use common::{header, manual_limiter, serve, statuses};
use http::{Response, StatusCode};
use weir_core::Rule;
use weir_tower::{RateLimitLayer, RefusalReason};

const HTML: (&str, &str) = ("accept", "text/html,application/xhtml+xml");

#[tokio::test]
async fn a_browser_over_the_limit_gets_the_page_with_the_layers_headers() {
    let (limiter, _clock) = manual_limiter();
    let addr = serve(custom_429::app(limiter).unwrap(), true).await;

    assert_eq!(statuses(addr, "/", &[HTML], 3).await, [200, 200, 200]);
    let page = common::get(addr, "/", &[HTML]).await;
    assert_eq!(page.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&page, "content-type"), "text/html; charset=utf-8");
    let retry = header(&page, "retry-after");
    assert!(
        page.body().contains(&format!("try again in {retry} s")),
        "{}",
        page.body()
    );
    assert_eq!(header(&page, "ratelimit-policy"), r#""per_ip";q=3;w=60"#);
    assert_eq!(
        header(&page, "ratelimit"),
        format!(r#""per_ip";r=0;t={retry}"#)
    );

    // An API client: the layer's own JSON answer, through the handler's fallback.
    let json = common::get(addr, "/", &[("accept", "application/json")]).await;
    assert_eq!(json.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(header(&json, "content-type"), "application/json");
    let body: serde_json::Value = serde_json::from_str(json.body()).unwrap();
    assert_eq!(body["limit"], "per_ip");
}

#[tokio::test]
async fn a_handler_answers_every_refusal_and_keeps_its_own_headers() {
    let (limiter, _clock) = manual_limiter();
    let rule = Rule::fixed_window(1, Duration::from_secs(60)).unwrap();
    let layer = RateLimitLayer::per_ip_with(limiter, rule)
        .unwrap()
        .on_refusal(|refused| {
            let mut r = Response::new(format!(
                "{:?} by {}\n",
                refused.reason(),
                refused.limit().unwrap_or("-")
            ));
            *r.status_mut() = refused.status();
            r.headers_mut().insert("retry-after", 99.into());
            r
        });
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(layer);

    let addr = serve(app.clone(), true).await;
    assert_eq!(common::get(addr, "/", &[]).await.status(), 200);
    let limited = common::get(addr, "/", &[]).await;
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(limited.body(), "Limited by per_ip\n");
    assert_eq!(header(&limited, "retry-after"), "99", "the handler's own");
    assert!(header(&limited, "ratelimit").starts_with(r#""per_ip";r=0;t="#));

    // Without the peer's address: the handler sees the 503 too.
    let addr = serve(app, false).await;
    let unavailable = common::get(addr, "/", &[]).await;
    assert_eq!(unavailable.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        *unavailable.body(),
        format!("{:?} by -\n", RefusalReason::Unavailable)
    );
}
