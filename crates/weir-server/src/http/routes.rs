//! The decision API's router: the four routes `weir serve` adds to the listeners' routes
//! (`weir_listen::routes`), over one [`App`]; `weir proxy --api-decisions` mounts the same
//! routes over its own engine.

use axum::routing::post;
use axum::Router;

use super::{check, json, lease};
use crate::app::App;
use crate::settings::Settings;

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
