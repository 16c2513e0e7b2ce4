//! The HTTP API (axum): decisions (`POST /v1/check`, envoyproxy/ratelimit's `POST /json`),
//! operations (`/healthz`, `/readyz`, `/metrics`) and, when a token is configured, the
//! admin API under `/admin`. Every route shares one body size limit and one request
//! timeout; every error is a status code with a message that says what was wrong.
//!
//! `router.rs` assembles the routes; one file per group of routes.

mod admin;
mod body;
mod check;
mod error;
mod json;
mod ops;
mod router;

pub use router::router;
