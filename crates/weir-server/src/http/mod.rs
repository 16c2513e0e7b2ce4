//! The HTTP API (axum): decisions (`POST /v1/check`, envoyproxy/ratelimit's `POST /json`),
//! operations (`/healthz`, `/readyz`, `/metrics`) and, when a token is configured, the
//! admin API under `/admin`. Every route shares one body size limit and one request
//! timeout; every error is a status code with a message that says what was wrong.
//!
//! `router.rs` assembles the routes; one file per group of routes; `listener.rs` serves
//! the connections the shared accept loop takes (header-read timeout, connection cap,
//! head size), and answers `POST /v1/check` itself when asked (`direct.rs`); it also serves
//! any tower service without the router (`serve_service_with`, `weir proxy`'s listener).

mod admin;
mod admin_keys;
pub(crate) mod body;
pub(crate) mod check;
mod dashboard;
mod direct;
mod error;
mod head_timer;
pub(crate) mod json;
mod json_out;
mod lease;
mod listener;
mod ops;
mod origin;
mod router;

pub(crate) use listener::serve_http_tls;
pub use listener::{
    header_limit, serve_http, serve_http_with, serve_service_with, HttpLimits, Peer,
};
pub use router::router;
pub(crate) use router::{routes, Part};
