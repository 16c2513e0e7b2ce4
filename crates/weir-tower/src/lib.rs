//! # weir-tower
//!
//! Weir as a [tower] layer, for axum, hyper and tonic services: each request is keyed
//! (peer IP, client IP behind trusted proxies, a header, the route, the user, a key of your
//! own, one global key, or several of them), matched against per-route policies, and
//! checked against Weir's rules on any store, all of its limits at once. When a limit is
//! hit the policy chooses: **reject** (`429` with `Retry-After` and the IETF
//! `RateLimit-Policy` / `RateLimit` fields), **queue** (wait until allowed, up to a max
//! wait, with a bounded queue per key) or **degrade** (send the request to a fallback
//! service). A max in-flight limit bounds the requests inside the wrapped service. Allowed
//! responses carry the rate-limit headers too, so clients can pace themselves.
//!
//! For tonic (feature `tonic`, off by default: `weir-tower = { version = "0.1", features =
//! ["tonic"] }`), put the layer on the server builder
//! (`Server::builder().layer(RateLimitLayer::new(…))`): the peer address comes from tonic's
//! `TcpConnectInfo`, and a refusal reaches the client as the gRPC status
//! `RESOURCE_EXHAUSTED` (or `UNAVAILABLE`), with the rate-limit headers in its metadata. Any
//! other body type works once it implements [`RefusalBody`].
//!
//! Every clone of the service shares one budget (the state lives behind an `Arc`), unlike
//! `tower::limit::RateLimit`, whose clones each get a fresh one.
//!
//! The path of one request: [`Policy::applies`] → [`KeyBy`] (a [`KeyExtractor`]) builds
//! the key → [`Limits::evaluate`] (a [`Limiter`](weir_core::Limiter) `check_all`) →
//! [`OnLimit`] or the in-flight slot → your service → headers. A refused request is
//! answered by the layer, or by your handler ([`RateLimitLayer::on_refusal`]).
//!
//! The quick start, each client IP 10 requests a second (`examples/per_ip.rs`):
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use axum::{routing::get, Router};
//! use weir_core::Rule;
//! use weir_tower::RateLimitLayer;
//!
//! # #[cfg(feature = "axum")] // axum's body and ConnectInfo
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let layer = RateLimitLayer::per_ip(Rule::per_second(10)?)?;
//! let app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
//! # let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! # #[cfg(not(feature = "axum"))] fn main() {}
//! ```
//!
//! Without the peer's address (plain `axum::serve`) the layer refuses every request
//! (`503`) rather than let it through unlimited. Several limits are [`Policy`]s, each with a
//! key chosen by [`Policy::key`] (a policy without a key does not compile;
//! [`KeyBy::global`] is one budget shared by every client):
//!
//! ```no_run
//! use std::net::SocketAddr;
//! use std::time::Duration;
//! use axum::{routing::{get, post}, Router};
//! use weir_core::{Limiter, Rule};
//! use weir_tower::{InFlightLimit, KeyBy, OnLimit, Policy, RateLimitLayer};
//!
//! # #[cfg(feature = "axum")] // axum's body and ConnectInfo
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policies = vec![
//!     // Every client IP: 20 per second, bursts of 40.
//!     Policy::new("per_ip", Rule::gcra(20, Duration::from_secs(1), 40)?)?.key(KeyBy::peer_ip()),
//!     // Searches of one user: 5 per second, queued up to a second rather than refused.
//!     Policy::new("search", Rule::per_second(5)?)?
//!         .path("/search")
//!         .key(KeyBy::header("x-user-id")?)
//!         .on_limit(OnLimit::Queue { max_wait: Duration::from_secs(1), max_queued: 10 })?,
//! ];
//! let layer = RateLimitLayer::new(Limiter::default(), policies)?.max_in_flight(
//!     InFlightLimit::fixed(16, 256, Duration::from_secs(5)),
//! );
//! let app = Router::new()
//!     .route("/search", get(|| async { "results" }))
//!     .layer(layer);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! // Peer addresses reach the layer through ConnectInfo.
//! axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
//! # Ok(()) }
//! # #[cfg(not(feature = "axum"))] fn main() {}
//! ```
//!
//! A handler that answers a `429` itself (a login lockout) gets the layer's headers from one
//! call: [`headers_for`] (a [`Decision`](weir_core::Decision) or an inspected
//! [`Usage`](weir_core::Usage); `Retry-After` rounded up).
//!
//! Runnable examples: `per_ip` (the quick start), `custom_429` (your own refusal page),
//! `custom_key` (a [`KeyExtractor`] of your own) and `axum_app` (per-IP and per-user limits
//! and a login lockout), in `examples/`.

mod client_ip;
mod extractor;
mod gate;
mod header_map;
mod in_flight;
mod key_by;
mod layer;
mod limits;
mod net;
mod path;
mod path_match;
mod policy;
mod refused;
mod response;
mod service;
mod shared;
mod waiters;

pub use client_ip::{peer_addr, ClientIp, ForwardedHeader, PrefixError};
pub use extractor::{KeyError, KeyExtractor, KeyParts};
pub use header_map::{headers_for, headers_in_style, AsDecision};
pub use in_flight::{InFlightLimit, InFlightStats};
pub use ipnet::IpNet;
pub use key_by::{HeaderNameError, KeyBy, UserFn};
pub use layer::RateLimitLayer;
pub use limits::{BoxFuture, Evaluation, LimitError, Limits, Policies};
pub use net::{parse_ip_net, IpNetError};
pub use path::normalise_path;
pub use path_match::{PathMatch, PathRefusal};
pub use policy::{HeaderPattern, KeyUnset, OnLimit, Policy, PolicyError};
pub use refused::{RefusalFn, RefusalReason, Refused};
pub use response::RefusalBody;
pub use service::{Degraded, Fallback, RateLimit, ResponseFuture};
/// Rate-limit headers and the limits they describe (`weir-names`, shared with the server).
pub use weir_names::{
    ceil_secs, rate_limit_headers, render_headers, tightest, Applied, HeaderStyle,
};

/// The Rust snippets of the repository's README, compiled (and the library's run) as
/// doctests, so what a newcomer pastes builds (its tower snippets need axum).
#[cfg(all(doctest, feature = "axum"))]
#[doc = include_str!("../../../README.md")]
mod readme {}

// The README's examples are compiled and run as doctests (they use axum).
#[cfg(all(doctest, feature = "axum"))]
#[doc = include_str!("../README.md")]
struct CrateReadmeDoctests;
