//! `weir serve`'s own HTTP routes, the decision APIs: `POST /v1/check` (Weir's JSON),
//! `POST /json` (envoyproxy/ratelimit's), and the leases (`POST /v1/acquire`,
//! `/v1/release`). They are served under the bounds of the listeners' router
//! (`weir_listen::routes`: body and header limits, request timeout, cross-site refusal,
//! JSON errors), beside the operations and admin API every Weir program serves; the two
//! hot paths are answered by the listener itself (`direct.rs`, a `weir_listen::Direct`).

pub(crate) mod check;
mod direct;
pub(crate) mod json;
mod json_out;
mod lease;

use axum::routing::post;
use axum::Router;

use crate::app::App;
use crate::settings::Settings;

pub(crate) use direct::Decisions;

/// The decision API's routes over `app`, their state given: what `weir serve`'s HTTP
/// listener adds to the listeners' routes (`weir_listen::routes`), and `weir proxy --api-
/// decisions` to its API listener.
pub fn decision_routes(app: App) -> Router {
    Router::new()
        .route("/v1/check", post(check::handle))
        .route("/json", post(json::handle))
        .route("/v1/acquire", post(lease::acquire))
        .route("/v1/release", post(lease::release))
        .with_state(app)
}

/// [`decision_routes`] over another program's engine and listener settings, `weir serve`'s
/// own settings at their defaults (no Envoy headers): `weir proxy --api-decisions`, on the
/// proxy's own counters.
pub fn decision_routes_on(listen: weir_listen::App) -> Router {
    let settings = Settings {
        listen: listen.settings().clone(),
        ..Settings::default()
    };
    decision_routes(App::with_engine(listen.engine().clone(), settings))
}
