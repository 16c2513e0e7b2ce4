//! `weir serve`'s own HTTP routes, the decision APIs: `POST /v1/check` (Weir's JSON),
//! `POST /json` (envoyproxy/ratelimit's), and the leases (`POST /v1/acquire`,
//! `/v1/release`). They are served under the bounds of the listeners' router
//! (`weir_listen::routes`: body and header limits, request timeout, cross-site refusal,
//! JSON errors), beside the operations and admin API every Weir program serves; the two
//! hot paths are answered by the listener itself (`direct.rs`, a `weir_listen::Direct`).

pub(crate) mod check;
mod check_fast;
mod direct;
pub(crate) mod json;
mod json_out;
mod lease;
mod routes;

pub(crate) use direct::Decisions;
pub use routes::{decision_routes, decision_routes_on};
