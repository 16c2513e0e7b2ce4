//! The HTTP API every Weir program serves (axum): operations (`/healthz`, `/readyz`,
//! `/healthcheck`, `/metrics`) and, when a token is configured, the admin API under
//! `/admin` and the dashboard; around them, whatever routes the program adds (`weir
//! serve`'s decisions). Every route shares one body size limit and one request timeout;
//! every error is a status code with a message that says what was wrong.
//!
//! `router.rs` assembles the routes; one file per group of routes; `listener.rs` serves
//! the connections the shared accept loop takes (header-read timeout, connection cap,
//! head size), and lets the program answer its hot paths itself ([`Direct`]); it also
//! serves any tower service without the router (`serve_service_with`, `weir proxy`'s
//! listener). `body.rs`, `error.rs` and `origin.rs` are what the program's own routes
//! share with these: reading a body, saying no, refusing a cross-site request.

mod admin;
mod admin_keys;
mod body;
mod dashboard;
mod error;
mod head_timer;
mod listener;
mod ops;
mod origin;
mod router;
mod write_stall;

pub use body::{
    parse, read_limited, require_json, require_json_type, too_large, BodyRead, EntryBody, JsonType,
    RawBody,
};
pub use error::{method_not_allowed, ApiError};
pub use listener::{
    header_limit, serve_http, serve_http_tls, serve_http_with, serve_service_with, Direct,
    HttpLimits, NoDirect, Peer,
};
pub use origin::refuse_cross_site;
pub use router::{head_too_large, out_of_time, router, routes, HeadFacts, Part};
