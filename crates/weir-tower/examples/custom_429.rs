//! Your own answer to a refused request: a small HTML page for browsers, and the layer's
//! JSON for everyone else. The layer still adds `Retry-After` and the `RateLimit` headers
//! to your response (those you did not set yourself).
//!
//! ```sh
//! cargo run -p weir-tower --example custom_429
//!
//! for i in 1 2 3 4; do curl -s localhost:3000/ -H 'accept: text/html'; echo; done
//! # hello ×3, then the page: "Slow down … try again in 60 s"
//! ```
//!
//! Where it sits: the handler runs at the end of a refused request's path, instead of the
//! layer's own `429` / `503` body; the decision itself is the same.

use std::net::SocketAddr;
use std::time::Duration;

use axum::{routing::get, Router};
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Response};
use weir_core::{Clock, Limiter, Rule, Store};
use weir_tower::{RateLimitLayer, RefusalReason, Refused};

/// The app: 3 requests a minute per client IP, refused with a page of its own.
pub fn app<S: Store, C: Clock>(
    limiter: Limiter<S, C>,
) -> Result<Router, Box<dyn std::error::Error>> {
    let rule = Rule::fixed_window(3, Duration::from_secs(60))?;
    let layer = RateLimitLayer::per_ip_with(limiter, rule)?.on_refusal(page);
    Ok(Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer))
}

/// A page for a browser that hit the limit; the layer's own answer otherwise.
fn page(refused: &Refused<'_>) -> Response<String> {
    let browser = refused
        .request()
        .headers
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/html"));
    if !browser || refused.reason() != RefusalReason::Limited {
        return refused.default_response();
    }
    let mut response = Response::new(format!(
        "<!doctype html><title>Slow down</title>\
         <p>Slow down: try again in {} s.</p>\n",
        refused.retry_after_secs()
    ));
    *response.status_mut() = refused.status();
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = app(Limiter::default())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
