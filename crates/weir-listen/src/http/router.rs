//! The HTTP routes and what every route shares: the header and body size limits (`431`,
//! `413`), the refusal of cross-site browser requests that would change state (`403`,
//! `origin.rs`), the request timeout (`408` for a body that does not arrive in time, `503` for an
//! answer that does not), and JSON 404 and 405 answers. The admin routes are mounted only
//! when a token is configured; without one, `/admin/...` is a plain 404. The decision
//! routes are the caller's (`weir_server::decision_routes`), merged here under the same
//! bounds: always for `weir serve`, for `weir proxy`'s API listener only when asked. With
//! an admin listener of its own, the admin API and the dashboard are served there and only
//! there ([`Part`]).

use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody as _};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::header::{CONTENT_TYPE, ORIGIN};
use axum::http::{self as http, header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use http_body_util::Full;
use weir_core::Clock as _;

use super::body::BodyRead;
use super::error::{method_not_allowed, ApiError};
use super::origin::refuse_cross_site;
use super::{admin, admin_keys, dashboard, ops};
use crate::app::App;

/// The operations and admin API of `app`, ready for `axum::serve` or `oneshot`: every
/// route on one listener (the admin API and the dashboard too, when a token is
/// configured), and no decision routes (see [`routes`]).
pub fn router(app: App) -> Router {
    routes(app, Part::All, None)
}

/// Which of the API's routes one listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Every route (the default: one HTTP listener).
    All,
    /// All but the admin API and the dashboard (the decision port when they have their own
    /// listener: `--admin-listen`).
    Public,
    /// The admin API and the dashboard (when a token is configured), and `/healthz`.
    Admin,
}

/// The routes of `part` (see [`router`]), with `decisions` (the decision API's routes, their
/// state already given; not on [`Part::Admin`]) under the same bounds: body limit, header
/// limit, cross-site refusal, request timeout, JSON 404 and 405.
pub fn routes(app: App, part: Part, decisions: Option<Router>) -> Router {
    let settings = app.settings();
    let mut router = Router::new();
    router = router.route("/healthz", get(ops::healthz));
    if part != Part::Admin {
        router = router
            .route("/readyz", get(ops::readyz))
            .route("/healthcheck", get(ops::healthcheck))
            .route("/metrics", get(ops::metrics));
    }
    if settings.admin_token.is_some() && part != Part::Public {
        let admin = admin::routes(app.clone()).merge(admin_keys::routes(app.clone()));
        router = router.nest("/admin", admin);
        router = router.merge(dashboard::routes(app.clone()));
    }
    let mut router: Router = router.with_state(app.clone());
    if let Some(decisions) = decisions.filter(|_| part != Part::Admin) {
        router = router.merge(decisions);
    }
    router
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(settings.max_body_bytes))
        .layer(middleware::from_fn_with_state(app, bounded))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no such endpoint")
}

/// Refuses headers past `max_header_bytes` (`431`), then bounds the request by
/// `request_timeout` (a slow store never hangs a client), and counts it in flight
/// meanwhile. Out of time while the body is still arriving, the client was slow: `408`
/// (and the connection closes, its body half read); otherwise the server was: `503`.
async fn bounded(State(app): State<App>, request: Request, next: Next) -> Response {
    if let Some(error) = head_too_large(&app, request.headers()) {
        return error.into_response();
    }
    if let Some(error) = refuse_cross_site(request.method(), request.headers()) {
        if let Some(api) = api_of(request.uri().path()) {
            app.engine().metrics().request(api, "invalid");
        }
        return error.into_response();
    }
    let _in_flight = app.engine().metrics().http_request_started();
    let api = api_of(request.uri().path());
    let clock = app.engine().limiter().clock().clone();
    let start_ns = clock.now_ns();
    let response = answer(&app, request, next).await;
    if let Some(api) = api {
        let took_ns = clock.now_ns().saturating_sub(start_ns);
        app.engine()
            .metrics()
            .request_duration(api, std::time::Duration::from_nanos(took_ns));
    }
    response
}

/// What the listener's direct routes read of a request's headers, in one pass: their size
/// as [`head_too_large`] counts it, whether [`refuse_cross_site`](super::refuse_cross_site)
/// has a header to judge, and the `Content-Type` for
/// [`require_json_type`](super::require_json_type). Each check then runs only when it has
/// something to say (the same checks, the same answers: this only spares a request three
/// lookups of its headers).
#[derive(Debug, Clone, Copy)]
pub struct HeadFacts<'a> {
    /// The headers' bytes: names and values.
    pub bytes: usize,
    /// An `Origin` or `Sec-Fetch-Site` header is present.
    pub from_browser: bool,
    /// The first `Content-Type` header.
    pub content_type: Option<&'a HeaderValue>,
}

impl<'a> HeadFacts<'a> {
    /// Reads `headers`.
    pub fn of(headers: &'a HeaderMap) -> Self {
        let mut facts = HeadFacts {
            bytes: 0,
            from_browser: false,
            content_type: None,
        };
        for (name, value) in headers {
            facts.bytes = facts
                .bytes
                .saturating_add(name.as_str().len().saturating_add(value.len()));
            if *name == CONTENT_TYPE {
                facts.content_type = facts.content_type.or(Some(value));
            } else if *name == ORIGIN || name.as_str() == "sec-fetch-site" {
                facts.from_browser = true;
            }
        }
        facts
    }
}

/// A `431` when the request's headers (names and values) add up to more than
/// `max_header_bytes`. Shared with the listener's direct route (`direct.rs`).
pub fn head_too_large(app: &App, headers: &HeaderMap) -> Option<ApiError> {
    let max_header_bytes = app.settings().max_header_bytes;
    let header_bytes: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len().saturating_add(value.len()))
        .fold(0, usize::saturating_add);
    (header_bytes > max_header_bytes).then(|| {
        ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            format!(
                "the request headers are {header_bytes} bytes, above the limit of \
                 {max_header_bytes}"
            ),
        )
    })
}

/// The answer to a request out of its time (`limit`): `408` and the connection closed when
/// its body was still arriving (`body_unread`), else `503`. Shared with the listener's
/// direct route.
pub fn out_of_time(limit: Duration, body_unread: bool) -> http::Response<Full<Bytes>> {
    if body_unread {
        let mut response = ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            format!(
                "the request body did not arrive within {} ms",
                limit.as_millis()
            ),
        )
        .into_full();
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("request took longer than {} ms", limit.as_millis()),
    )
    .into_full()
}

/// The `api` label of a path's requests; `None` for the operations endpoints.
fn api_of(path: &str) -> Option<&'static str> {
    match path {
        "/v1/check" => Some("http"),
        "/json" => Some("json"),
        "/v1/acquire" | "/v1/release" => Some("lease"),
        // The dashboard's data is an admin request (its token, its counters).
        _ if path.starts_with("/admin/") || path == "/admin" || path == "/dashboard/data" => {
            Some("admin")
        }
        _ => None,
    }
}

/// The request within its time bound (see [`bounded`]).
async fn answer(app: &App, mut request: Request, next: Next) -> Response {
    let limit = app.settings().request_timeout;
    let body = (!request.body().is_end_stream()).then(BodyRead::default);
    if let Some(body) = &body {
        request.extensions_mut().insert(body.clone());
    }
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => out_of_time(limit, body.is_some_and(|body| !body.done())).map(Body::new),
    }
}
