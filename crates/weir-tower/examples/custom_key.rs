//! A key of your own: limit each tenant of an API, as the authentication step found it.
//! `authenticate` (a middleware in front of the rate limit) reads `x-api-key: tenant.secret`
//! and records the caller in the request's extensions; `ByTenant`, a [`KeyExtractor`],
//! turns that record into the key. Anonymous callers have no tenant key, so the tenant
//! limit does not apply to them; the per-IP limit still does.
//!
//! ```sh
//! cargo run -p weir-tower --example custom_key
//!
//! for i in 1 2 3 4 5 6; do curl -s -o /dev/null -w '%{http_code} ' \
//!   -H 'x-api-key: acme.s3cret' localhost:3000/api; done   # 200 ×5, then 429
//! curl -s -o /dev/null -w '%{http_code}\n' -H 'x-api-key: globex.pw' localhost:3000/api
//! # 200: another tenant, a budget of its own
//! ```
//!
//! An extractor has three answers: a key, no key (the policy does not apply), or an error
//! (the key should exist but cannot be built). Here a request the authentication step never
//! saw is an error — the app is wired wrong — and the layer refuses it (`503`, fail
//! closed) rather than let it through unlimited.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::Request;
use axum::{middleware, routing::get, Router};
use http::request::Parts;
use weir_core::{Clock, Limiter, Rule, Store};
use weir_tower::{KeyBy, KeyError, KeyExtractor, KeyParts, Policy, RateLimitLayer};

/// Who is calling, as `authenticate` found it.
#[derive(Debug, Clone)]
pub enum Caller {
    /// A tenant's API key (its secret unchecked here: a real app verifies it).
    Tenant(String),
    /// No API key.
    Anonymous,
}

/// Records the caller of each request.
async fn authenticate(mut request: Request) -> Request {
    let caller = request
        .headers()
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .and_then(|key| key.split_once('.'))
        .map_or(Caller::Anonymous, |(tenant, _secret)| {
            Caller::Tenant(tenant.to_string())
        });
    request.extensions_mut().insert(caller);
    request
}

/// Keys a request by its tenant.
pub struct ByTenant;

impl KeyExtractor for ByTenant {
    fn extract(&self, request: &Parts) -> Result<Option<KeyParts>, KeyError> {
        match request.extensions.get::<Caller>() {
            Some(Caller::Tenant(tenant)) => Ok(Some(KeyParts::new("tenant", tenant.as_str()))),
            Some(Caller::Anonymous) => Ok(None),
            None => Err(KeyError::new(
                "no Caller: the authentication middleware must run before the rate limit",
            )),
        }
    }
}

/// The API's routes with the rate limit: 5 a minute per tenant, 20 a minute per client IP.
pub fn limited<S: Store, C: Clock>(
    limiter: Limiter<S, C>,
) -> Result<Router, Box<dyn std::error::Error>> {
    let policies = vec![
        Policy::new(
            "per_tenant",
            Rule::fixed_window(5, Duration::from_secs(60))?,
        )?
        .key(KeyBy::custom(ByTenant)),
        Policy::new("per_ip", Rule::fixed_window(20, Duration::from_secs(60))?)?
            .key(KeyBy::peer_ip()),
    ];
    Ok(Router::new()
        .route("/api", get(|| async { "data\n" }))
        .layer(RateLimitLayer::new(limiter, policies)?))
}

/// The app: authentication (outermost, so it runs first), then the rate limit.
pub fn app<S: Store, C: Clock>(
    limiter: Limiter<S, C>,
) -> Result<Router, Box<dyn std::error::Error>> {
    Ok(limited(limiter)?.layer(middleware::map_request(authenticate)))
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
