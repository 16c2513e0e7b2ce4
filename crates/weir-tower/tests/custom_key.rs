//! `examples/custom_key.rs` on real sockets: a `KeyExtractor` of one's own keys each
//! tenant; anonymous callers fall to the per-IP limit; and a request the extractor cannot
//! key (the authentication step missing) is refused, fail closed.

#![cfg(feature = "axum")] // reads the peer address the way axum records it
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;
#[path = "../examples/custom_key.rs"]
#[allow(dead_code)]
mod custom_key;

use common::{header, manual_limiter, serve, statuses};

#[tokio::test]
async fn each_tenant_has_its_own_budget_and_anonymous_callers_fall_to_the_ip_limit() {
    let (limiter, _clock) = manual_limiter();
    let addr = serve(custom_key::app(limiter).unwrap(), true).await;

    let acme = [("x-api-key", "acme.s3cret")];
    assert_eq!(
        statuses(addr, "/api", &acme, 6).await,
        [200, 200, 200, 200, 200, 429]
    );
    let denied = common::get(addr, "/api", &acme).await;
    assert!(header(&denied, "ratelimit").starts_with(r#""per_tenant";r=0;"#));
    let globex = common::get(addr, "/api", &[("x-api-key", "globex.pw")]).await;
    assert_eq!(globex.status(), 200, "another tenant, a budget of its own");

    // The per-IP limit (20 a minute) counted the 6 allowed requests from 127.0.0.1 (a
    // denied one consumes nothing); anonymous callers have 14 left, and no tenant limit.
    let mut codes = statuses(addr, "/api", &[], 15).await;
    assert_eq!(codes.pop(), Some(429));
    assert!(codes.iter().all(|c| *c == 200), "{codes:?}");
}

#[tokio::test]
async fn a_request_the_extractor_cannot_key_is_refused_not_let_through() {
    let (limiter, _clock) = manual_limiter();
    // The routes without the authentication step in front: no request has a Caller.
    let addr = serve(custom_key::limited(limiter).unwrap(), true).await;
    assert_eq!(
        statuses(addr, "/api", &[("x-api-key", "acme.s3cret")], 3).await,
        [503, 503, 503]
    );
}
