//! The HTTP routes and what every route shares: the body size limit, the request timeout,
//! and JSON 404 and 405 answers. The admin routes are mounted only when a token is configured; without
//! one, `/admin/...` is a plain 404. The decision routes only when `decision_api` is on
//! (always for `weir serve`; for `weir proxy`'s API listener only when asked).

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::StatusCode;
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;

use super::error::{method_not_allowed, ApiError};
use super::{admin, check, json, lease, ops};
use crate::app::App;

/// The HTTP API of `app`, ready for `axum::serve` or `oneshot`.
pub fn router(app: App) -> Router {
    let settings = app.settings();
    let mut router = Router::new();
    if settings.decision_api {
        router = router
            .route("/v1/check", post(check::handle))
            .route("/json", post(json::handle))
            .route("/v1/acquire", post(lease::acquire))
            .route("/v1/release", post(lease::release));
    }
    let mut router = router
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics));
    if settings.admin_token.is_some() {
        router = router.nest("/admin", admin::routes(app.clone()));
    }
    router
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(middleware::from_fn_with_state(app.clone(), timeout))
        .with_state(app)
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

/// Bounds every request by `request_timeout` (a slow store never hangs a client), and
/// counts it in flight meanwhile.
async fn timeout(State(app): State<App>, request: Request, next: Next) -> Response {
    let _in_flight = app.metrics().http_request_started();
    let limit = app.settings().request_timeout;
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("request took longer than {} ms", limit.as_millis()),
        )
        .into_response(),
    }
}
