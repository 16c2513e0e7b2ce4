//! # weir-server
//!
//! `weir serve`: Weir's decision server, a front end over the one decision engine
//! ([`weir_engine::Engine`]: rules, store, limiter, metrics). One [`App`] (the engine and
//! these settings) answers three APIs the same way:
//!
//! - **Envoy's rate limit gRPC API** (`envoy.service.ratelimit.v3.RateLimitService/
//!   ShouldRateLimit`), a drop-in for envoyproxy/ratelimit: same YAML, same answers;
//! - **`POST /v1/check`**, Weir's JSON API, with rate-limit headers and `429`;
//! - **`POST /json`**, envoyproxy/ratelimit's JSON endpoint.
//!
//! Around them, served by the listeners every Weir program shares (`weir-listen`: the
//! accept loop, connection caps and timers, TLS and mutual TLS, the admin token):
//! `/healthz`, `/readyz`, envoyproxy/ratelimit's `/healthcheck`, `/metrics`, an admin API
//! and a dashboard (only with a token; on the HTTP listener, or on their own:
//! [`Listeners`], [`serve_on`]); here, `grpc.health.v1.Health` (`health.rs`). Hot reload of
//! the rule files (a bad file keeps the old rules), shadow mode and gradual roll-out are
//! the engine's. A browser's cross-site request that would change state is refused
//! (`403`); a fail-closed denial during a store outage says so ([`Verdict`]'s
//! `failed_closed`: a reason in each API's answer).
//!
//! The path of one decision: an API parses its request (`http/`, `grpc.rs` + `rls.rs`) into
//! a [`CheckRequest`] → the engine decides it (`Engine::decide`: the rule snapshot in
//! force, one limiter check per matched descriptor, shadow / roll-out, metrics) → the
//! [`Verdict`] is rendered with headers (`headers.rs`). `weir proxy` serves the same
//! operations and admin API from `weir-listen`, and these decision routes on it only when
//! asked ([`decision_routes`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use tokio::net::TcpListener;
//! let settings = weir_server::Settings::default().with_rules("config/ratelimit");
//! let http = TcpListener::bind("127.0.0.1:8080").await?;
//! let grpc = TcpListener::bind("127.0.0.1:8081").await?;
//! weir_server::run(settings, http, grpc, async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await?;
//! # Ok(()) }
//! ```
//!
//! ## Limits
//!
//! Request bodies and gRPC messages are at most [`Settings::max_body_bytes`](weir_listen::Settings::max_body_bytes) (64 KiB); a
//! request takes at most [`Settings::request_timeout`](weir_listen::Settings::request_timeout) (5 s; a body still arriving then is
//! a `408`), and its headers at most [`Settings::max_header_bytes`](weir_listen::Settings::max_header_bytes) (16 KiB, `431`). Each
//! listener keeps at most [`Settings::max_connections`](weir_listen::Settings::max_connections) open (4096; one past it is closed
//! at once); an HTTP connection is closed after [`Settings::header_read_timeout`](weir_listen::Settings::header_read_timeout) without a
//! whole request head (10 s), a gRPC one after [`Settings::grpc_idle_timeout`] without a
//! request (5 min) or when it does not answer HTTP/2 pings. Descriptor counts, entry
//! counts, key, value and domain lengths and hits are bounded by `weir_config::bounds`
//! (64 descriptors, 16 entries, 256-byte keys, 1 KiB values, 256-byte domains, hits up to
//! 10⁹). Anything over a limit is a 400 / `INVALID_ARGUMENT` that names it.

mod app;
pub mod client;
mod deadline;
mod envoy_unit;
mod error;
#[doc(hidden)]
pub mod fuzzing;
mod grpc;
mod grpc_listener;
mod headers;
mod health;
mod http;
mod rls;
mod serve;
mod settings;

pub use app::App;
pub use client::{ClientError, HttpAnswer};
pub use envoy_unit::{envoy_limit, EnvoyLimit};
pub use error::ServerError;
pub use grpc::RlsService;
pub use headers::{verdict_headers, HeaderNameError, HeaderStyle, LegacyHeaders, ResponseHeaders};
pub use health::HEALTH_SERVICES;
pub use http::{decision_routes, decision_routes_on};
pub use serve::{router, run, serve, serve_on, Listeners};
pub use settings::Settings;
/// The engine every API decides through, and the types a front end's caller meets
/// (re-exported so that one dependency suffices to configure and embed a server).
pub use weir_engine::{
    CheckRequest, Code, DecideError, Engine, EngineSettings, LeaseConfig, LimitOverrides,
    Readiness, ReloadSettings, RuleSource, SharedClock, StoreClock, StoreSpec, Verdict,
};
/// The listeners' types a caller of `weir serve` meets (its settings hold them).
pub use weir_listen::{AdminToken, TlsFiles, TlsVersion, TokenError};

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
