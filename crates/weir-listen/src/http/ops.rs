//! Operations endpoints: `/healthz` (the process answers), `/readyz` (it can decide: the
//! store answers, or a failover guard's failure policies cover it; JSON),
//! `/healthcheck` (the same readiness as envoyproxy/ratelimit answers it: `200 OK`, else
//! `500`), `/metrics` (the Prometheus text format, or OpenMetrics to a client that accepts
//! only that: `weir_engine::Exposition` says which and why).

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::app::App;

/// `GET /healthz`: always `200 ok` while the process serves.
pub(crate) async fn healthz() -> &'static str {
    "ok\n"
}

/// `GET /readyz`: `200` when ready, `503` when not, with the reason as JSON.
pub(crate) async fn readyz(State(app): State<App>) -> Response {
    let readiness = app.engine().readiness().await;
    let status = if readiness.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(readiness)).into_response()
}

/// `GET /healthcheck`: `200` with the body `OK` when ready, `500` when not (with the
/// reason), as envoyproxy/ratelimit's health check.
pub(crate) async fn healthcheck(State(app): State<App>) -> Response {
    let readiness = app.engine().readiness().await;
    if readiness.ready {
        (StatusCode::OK, "OK").into_response()
    } else {
        let reason = readiness.detail.unwrap_or_default();
        (StatusCode::INTERNAL_SERVER_ERROR, format!("{reason}\n")).into_response()
    }
}

/// `GET /metrics`, in the format the `Accept` header chooses (every `Accept` field
/// joined, as HTTP allows one list over several lines; one not readable as text counts as
/// absent).
pub(crate) async fn metrics(State(app): State<App>, headers: HeaderMap) -> Response {
    let accept: Vec<&str> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let accept = (!accept.is_empty()).then(|| accept.join(","));
    let format = weir_engine::Exposition::negotiate(accept.as_deref());
    (
        [
            (header::CONTENT_TYPE, format.content_type()),
            (header::VARY, "Accept"),
        ],
        app.engine().render_metrics_as(format),
    )
        .into_response()
}
