//! The direct routes: `POST /v1/check` and `POST /json`, the decision APIs' hot paths,
//! answered by the HTTP listener itself (`listener.rs`) instead of through the router.
//! Every other request, these paths with another method included, goes to the router.
//!
//! It applies what the router's `bounded` middleware and `RawBody` apply, with the same
//! helpers and the same answers: the header limit (`431`), the in-flight gauge and the
//! latency histogram (`api="http"`), the refusal of cross-site browser requests (`403`,
//! `origin.rs`), the request timeout (`408` and the connection closed
//! when the body is still arriving, `503` otherwise), the body limit (`413`); then
//! `check::answer` / `json::answer` do the rest, as the router's handlers do. What it saves is the
//! router's and the middleware's work on every decision: the route lookup, the request's
//! extensions, two boxed futures and a boxed response body (issue 14, docs/benchmarks-history.md "Hot
//! paths"). `weir serve` turns it on ([`Decisions`], a `weir_listen::Direct`); a router
//! served on its own (`serve_http`, `weir proxy`'s API listener) has none.

use std::time::Duration;

use std::future::Future;

use axum::body::Bytes;
use axum::http::{Method, Request, Response};
use http_body_util::Full;
use hyper::body::Incoming;
use weir_core::Clock as _;
use weir_listen::http::{
    head_too_large, out_of_time, read_limited, refuse_cross_site, require_json_type, HeadFacts,
};

use super::{check, json};
use crate::app::App;
use crate::deadline::in_time;

/// The listener's direct routes for `weir serve`'s HTTP listener, over its app.
#[derive(Debug, Clone)]
pub(crate) struct Decisions(pub(crate) App);

impl weir_listen::Direct for Decisions {
    type Route = Route;

    fn route(&self, request: &Request<Incoming>) -> Option<Route> {
        Route::of(request)
    }

    fn answer(
        &self,
        route: Route,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Full<Bytes>>> + Send {
        serve(&self.0, route, request)
    }
}

/// The decision routes the listener answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// `POST /v1/check`.
    Check,
    /// `POST /json`.
    Json,
}

impl Route {
    /// The direct route `request` takes, if any.
    pub(crate) fn of<B>(request: &Request<B>) -> Option<Route> {
        if request.method() != Method::POST {
            return None;
        }
        match request.uri().path() {
            "/v1/check" => Some(Route::Check),
            "/json" => Some(Route::Json),
            _ => None,
        }
    }

    /// The `api` label of the route's requests in the metrics.
    fn api(self) -> &'static str {
        match self {
            Route::Check => "http",
            Route::Json => "json",
        }
    }
}

/// Answers a request on a direct `route` (see the module's documentation).
pub(crate) async fn serve(
    app: &App,
    route: Route,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    // One pass over the headers says which checks have anything to judge.
    let head = HeadFacts::of(request.headers());
    if head.bytes > app.listen().settings().max_header_bytes {
        if let Some(error) = head_too_large(app.listen(), request.headers()) {
            return error.into_full();
        }
    }
    let metrics = app.engine().metrics();
    if head.from_browser {
        if let Some(error) = refuse_cross_site(request.method(), request.headers()) {
            metrics.request(route.api(), "invalid");
            return error.into_full();
        }
    }
    let json = require_json_type(head.content_type);
    let _in_flight = metrics.http_request_started();
    let clock = app.engine().limiter().clock();
    let start_ns = clock.now_ns();
    let limit = app.settings().request_timeout;
    let mut body_read = false;
    let elapsed = || Duration::from_nanos(clock.now_ns().saturating_sub(start_ns));
    let answered = {
        let within = std::pin::pin!(within(app, route, request, json, &mut body_read));
        in_time(limit, elapsed, within).await
    };
    let response = match answered {
        Some(response) => response,
        None => out_of_time(limit, !body_read),
    };
    let took_ns = clock.now_ns().saturating_sub(start_ns);
    metrics.request_duration(route.api(), Duration::from_nanos(took_ns));
    response
}

/// The body, then the answer (`json`: whether the head said the body is JSON); `body_read`
/// is set once the body has arrived whole.
async fn within(
    app: &App,
    route: Route,
    request: Request<Incoming>,
    json: Result<(), weir_listen::http::ApiError>,
    body_read: &mut bool,
) -> Response<Full<Bytes>> {
    let body = request.into_body();
    let body = match read_limited(body, app.settings().max_body_bytes).await {
        Ok(body) => body,
        Err(error) => return error.into_full(),
    };
    *body_read = true;
    match route {
        Route::Check => check::answer(app, json, &body).await,
        Route::Json => json::answer(app, &body).await,
    }
}
