//! Running the proxy: the engine (rules, store, metrics) is built, the rules are checked
//! for the proxy, the header limit and the screen (requests refused outright) and the
//! layer are put in front of the forwarder, and two listeners are served (by `weir
//! serve`'s accept loop, `weir-listen`: a client must send its headers within the
//! header-read timeout) until shutdown — the proxy itself, as one tower service straight on
//! hyper (no router: `weir_listen::serve_service_with`), and the operations and admin API
//! every Weir program serves (metrics, health, admin: `weir_listen::router`). Shutdown stops accepting, lets in-flight requests finish (up to a
//! grace period), closes the open tunnels (WebSocket), then stops the background tasks
//! (rule reload, memory sweep).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use tokio::net::TcpListener;
use tower::{Layer, Service};
use weir_engine::{Engine, EngineError, Lifecycle, Metrics, UpstreamBreakers as _};
use weir_listen::{header_limit, serve_http_with, serve_service_with, App, HttpLimits, Peer};
use weir_tower::{OnLimit, PathMatch, RateLimitLayer};

use crate::answer::ProxyBody;
use crate::forward::{Forward, Routes};
use crate::in_flight::{in_flight_metrics, in_flight_panel, priority_of};
use crate::limits::ProxyLimits;
use crate::reply::error;
use crate::screen;
use crate::settings::ProxySettings;

/// Why the proxy could not start or stopped on its own.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The engine could not be built (rules, store URL).
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A listener failed (the message holds the cause; no second copy as `source()`).
    #[error("listener: {0}")]
    Io(std::io::Error),
    /// A circuit breaker knob cannot be used.
    #[error(transparent)]
    Breaker(#[from] crate::breaker::BreakerError),
}

impl From<std::io::Error> for ProxyError {
    fn from(error: std::io::Error) -> Self {
        Self::Io(error)
    }
}

/// Counts every proxied request in the server's metrics: `weir_requests_total{api="proxy"}`
/// by the status class answered (the layer's own 429 / 503, the header limit's 431 and the
/// screen's refusals included), and the in-flight gauge while it runs. The header limit
/// (`weir serve`'s own, `weir_listen::header_limit`) and the screen run here too. The
/// listener's service itself, with a future of its own, in front of the layer: no router,
/// no middleware's boxed future and cloned inner service on every request's way.
#[derive(Clone)]
struct Counted<S> {
    inner: S,
    /// The server's settings (the header limit) and metrics.
    app: App,
    /// How the screen reads paths (ambiguous spellings refused under `Normalized`).
    path_match: PathMatch,
}

impl<S> Service<Request<Incoming>> for Counted<S>
where
    S: Service<Request<Incoming>, Response = Response<ProxyBody>, Error = Infallible>,
    S::Future: Unpin,
{
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Counting<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Incoming>) -> Self::Future {
        let metrics = self.app.engine().metrics();
        metrics.http_request_begun();
        let answer = if let Some(answer) = header_limit(&self.app, request.headers()) {
            tracing::debug!("request refused: its headers are too large");
            Answer::Refused(Some(Box::new(answer.map(ProxyBody::own))))
        } else {
            match screen::screen(&request, self.path_match) {
                Ok(()) => Answer::Inner(self.inner.call(request)),
                Err(refusal) => {
                    tracing::debug!(%refusal, "request refused");
                    let answer = error(refusal.status(), &refusal.to_string());
                    Answer::Refused(Some(Box::new(answer)))
                }
            }
        };
        Counting {
            answer,
            metrics: Arc::clone(metrics),
        }
    }
}

/// Where a [`Counted`] request's answer comes from.
enum Answer<F> {
    /// The layer and the forwarder.
    Inner(F),
    /// The header limit's or the screen's refusal (taken once; boxed, being rare, so the
    /// future stays small).
    Refused(Option<Box<Response<ProxyBody>>>),
}

/// The future of a [`Counted`] request: its answer, counted when it is ready; the request
/// is in flight (`weir_http_requests_in_flight`) from its call until this is dropped.
struct Counting<F> {
    answer: Answer<F>,
    metrics: Arc<Metrics>,
}

impl<F> Drop for Counting<F> {
    fn drop(&mut self) {
        self.metrics.http_request_ended();
    }
}

impl<F> Future for Counting<F>
where
    F: Future<Output = Result<Response<ProxyBody>, Infallible>> + Unpin,
{
    type Output = Result<Response<ProxyBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let response = match &mut self.answer {
            Answer::Inner(inner) => match Pin::new(inner).poll(cx) {
                Poll::Ready(Ok(response)) => response,
                Poll::Pending => return Poll::Pending,
            },
            Answer::Refused(refusal) => match refusal.take() {
                Some(response) => *response,
                None => return Poll::Pending,
            },
        };
        self.metrics.request("proxy", result_of(response.status()));
        Poll::Ready(Ok(response))
    }
}

/// The `result` label of an answer's status.
fn result_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        429 => "over_limit",
        502 => "bad_gateway",
        503 => "unavailable",
        504 => "gateway_timeout",
        200..=399 => "ok",
        400..=499 => "client_error",
        _ => "error",
    }
}

/// Runs the proxy on `listener` and the HTTP API on `api` until `shutdown` completes.
pub async fn run(
    settings: ProxySettings,
    listener: TcpListener,
    api: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ProxyError> {
    if let Some(breaker) = &settings.breaker {
        breaker.check()?;
    }
    let mut server = settings.server.clone();
    // A rule function holds no state: one per path reading.
    server.engine.validate = Some(match settings.path_match {
        PathMatch::Exact => {
            |rules: &_| ProxyLimits::check_rules(rules, PathMatch::Exact).map_err(|e| e.to_string())
        }
        _ => |rules: &_| {
            ProxyLimits::check_rules(rules, PathMatch::Normalized).map_err(|e| e.to_string())
        },
    });
    let engine = Engine::open(server.engine.clone()).await?;
    // The API listener (metrics, health, admin) is every Weir program's, over the same
    // engine.
    let app = App::with_engine(engine.clone(), server);
    let on_limit = match (settings.on_limit, &settings.fallback_upstream) {
        (OnLimit::Degrade, None) => OnLimit::Reject,
        (on_limit, _) => on_limit,
    };
    let limits = ProxyLimits::new(
        engine.clone(),
        settings.classes.clone(),
        settings.client_ip.clone(),
        on_limit,
    )
    .path_match(settings.path_match);
    let mut layer = RateLimitLayer::with_limits(limits).headers(settings.server.headers);
    // The in-flight limit (fixed or adaptive), its priorities by class, its metrics.
    if let Some(in_flight) = settings.in_flight {
        let classes = settings.classes.clone();
        let priorities = settings.class_priorities.clone();
        layer = layer
            .max_in_flight(in_flight)
            .priority(move |parts| priority_of(&classes, &priorities, parts));
        let watched = layer.clone();
        engine
            .metrics()
            .add_section(Box::new(move |out| in_flight_metrics(&watched, out)));
        let watched = layer.clone();
        let adaptive = in_flight.adaptive.is_some();
        engine.metrics().add_panel(
            "in_flight",
            Box::new(move || in_flight_panel(&watched, adaptive)),
        );
    }
    let forward = Forward::new(
        Routes {
            upstream: settings.upstream.clone(),
            fallback: settings.fallback_upstream.clone(),
            by_class: settings.class_upstreams.clone(),
            classes: settings.classes.clone(),
        },
        settings.upstream_timeout,
        settings.client_ip.clone(),
    )
    .client_body_timeout(settings.client_body_timeout)
    .upstream_body_timeout(settings.upstream_body_timeout)
    .tunnels(settings.max_tunnels, settings.tunnel_idle_timeout);
    // The circuit breakers (off unless set), timed on the engine's clock.
    let forward = match settings.breaker {
        Some(breaker) => {
            let forward = forward.breakers(breaker, &settings.server.engine.clock);
            let breakers = forward.upstream_breakers();
            engine.metrics().watch_upstream_breakers(breakers.clone());
            engine.metrics().add_panel(
                "upstreams",
                Box::new(move || serde_json::to_value(breakers.views()).unwrap_or_default()),
            );
            forward
        }
        None => forward,
    };
    let proxy = Counted {
        inner: layer.layer(forward.clone()),
        app: app.clone(),
        path_match: settings.path_match,
    };
    let background = engine.spawn_background();

    tracing::info!(
        listen = %listener.local_addr()?,
        api = %api.local_addr()?,
        upstream = %settings.upstream,
        fallback = ?settings.fallback_upstream.as_ref().map(ToString::to_string),
        store = %settings.server.engine.store,
        rules = %engine.config_status().source,
        "weir proxy: listening"
    );
    weir_listen::warn_if_files_run_short(2, settings.server.max_connections);
    let lifecycle = Lifecycle::new();
    // Both listeners bounded as weir serve's: a connection cap each, a header-read
    // timeout, a request-head limit (431: hyper's past twice the header limit, and below
    // it weir serve's own, which `Counted` applies).
    let limits = HttpLimits::of(&settings.server);
    let proxy_task = tokio::spawn(serve_service_with(
        listener,
        proxy,
        limits.clone(),
        Peer::Recorded,
        lifecycle.stopped(),
    ));
    let api_task = tokio::spawn(serve_http_with(
        api,
        weir_listen::routes(
            app.clone(),
            weir_listen::Part::All,
            settings.api_routes.map(|routes| routes(app.clone())),
        ),
        limits,
        Peer::Unrecorded,
        lifecycle.stopped(),
    ));
    let early = lifecycle
        .run(
            "weir proxy",
            [proxy_task, api_task],
            shutdown,
            settings.shutdown_grace,
            || engine.start_draining(),
            background,
        )
        .await;
    // Tunnels are not requests: the grace did not wait for them, and they close now.
    forward.close_tunnels();
    // The memory store's state file, once more now that nothing decides any longer.
    let _ = engine.save_state().await;
    match early {
        Some((_, Err(e))) => Err(ProxyError::Io(e)),
        _ => Ok(()),
    }
}
