//! The quick start: every client IP gets 10 requests a second, in three lines (the layer,
//! the router, serving with the peer's address). Over the limit a client gets `429` with
//! `Retry-After` and the `RateLimit` headers; every answer carries the headers.
//!
//! ```sh
//! cargo run -p weir-tower --example per_ip
//!
//! for i in $(seq 12); do curl -s -o /dev/null -w '%{http_code} ' localhost:3000/; done
//! # 200 ×10, then 429
//! ```
//!
//! Serve with `into_make_service_with_connect_info::<SocketAddr>()`: the layer keys by the
//! TCP peer, and without it every request is refused (`503`), never let through unlimited.
//! For a store shared by several instances, `RateLimitLayer::per_ip_with(limiter, rule)`.

use std::net::SocketAddr;

use axum::{routing::get, Router};
use weir_core::Rule;
use weir_tower::RateLimitLayer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let layer = RateLimitLayer::per_ip(Rule::per_second(10)?)?;
    let app = Router::new()
        .route("/", get(|| async { "hello\n" }))
        .layer(layer);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
