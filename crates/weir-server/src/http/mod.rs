//! The HTTP API (axum): decisions (`POST /v1/check`, envoyproxy/ratelimit's `POST /json`),
//! operations (`/healthz`, `/readyz`, `/metrics`) and, when a token is configured, the
//! admin API under `/admin`. Every route shares one body size limit and one request
//! timeout; every error is a status code with a message that says what was wrong.
//!
//! `router.rs` assembles the routes; one file per group of routes; `listener.rs` accepts
//! connections (with the header-read timeout).

mod admin;
pub(crate) mod body;
pub(crate) mod check;
mod error;
pub(crate) mod json;
mod lease;
mod listener;
mod ops;
mod router;

pub use listener::{serve_http, Peer};
pub use router::router;
