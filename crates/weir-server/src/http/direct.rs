//! The direct route: `POST /v1/check`, the decision API's hot path, answered by the HTTP
//! listener itself (`listener.rs`) instead of through the router. Every other request,
//! `/v1/check` with another method included, goes to the router.
//!
//! It applies what the router's `bounded` middleware and `RawBody` apply, with the same
//! helpers and the same answers: the header limit (`431`), the in-flight gauge and the
//! latency histogram (`api="http"`), the request timeout (`408` and the connection closed
//! when the body is still arriving, `503` otherwise), the body limit (`413`); then
//! `check::answer` does the rest, as the router's handler does. What it saves is the
//! router's and the middleware's work on every decision: the route lookup, the request's
//! extensions, two boxed futures and a boxed response body (issue 14, BENCHMARKS.md "Hot
//! paths"). `weir serve` turns it on; a router served on its own (`serve_http`, `weir
//! proxy`'s API listener) has none.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use weir_core::Clock as _;

use super::body::{read_limited, require_json};
use super::check;
use super::router::{head_too_large, out_of_time};
use crate::app::App;

/// Whether `request` takes the direct route.
pub(crate) fn takes<B>(request: &Request<B>) -> bool {
    request.method() == Method::POST && request.uri().path() == "/v1/check"
}

/// Answers a `POST /v1/check` (see the module's documentation).
pub(crate) async fn check(app: &App, request: Request<Incoming>) -> Response<Full<Bytes>> {
    if let Some(error) = head_too_large(app, request.headers()) {
        return error.into_full();
    }
    let metrics = app.engine().metrics();
    let _in_flight = metrics.http_request_started();
    let clock = app.engine().limiter().clock();
    let start_ns = clock.now_ns();
    let limit = app.settings().request_timeout;
    let mut body_read = false;
    let response = match tokio::time::timeout(limit, within(app, request, &mut body_read)).await {
        Ok(response) => response,
        Err(_) => out_of_time(limit, !body_read),
    };
    let took_ns = clock.now_ns().saturating_sub(start_ns);
    metrics.request_duration("http", Duration::from_nanos(took_ns));
    response
}

/// The body, then the answer; `body_read` is set once the body has arrived whole.
async fn within(
    app: &App,
    request: Request<Incoming>,
    body_read: &mut bool,
) -> Response<Full<Bytes>> {
    let (head, body) = request.into_parts();
    let body = match read_limited(body, app.settings().max_body_bytes).await {
        Ok(body) => body,
        Err(error) => return error.into_full(),
    };
    *body_read = true;
    check::answer(app, require_json(&head.headers), &body).await
}
