//! Where an HTTP request enters: each connection the shared accept loop (`accept.rs`)
//! takes is served by hyper's HTTP/1 server with the axum router as its service, except
//! the routes the caller answers itself ([`Direct`]: `weir serve`'s `POST /v1/check` and
//! `POST /json`);
//! or, for `weir proxy`'s proxy listener, with any tower service and no router
//! ([`serve_service_with`]). Both ways share one core (`serve_connections`): the accept
//! loop, the bounds below, TLS when asked, and shutdown.
//!
//! It exists for bounds that `axum::serve` does not set ([`HttpLimits`]):
//! - a client must finish sending its request headers within `header_read_timeout`, or the
//!   connection is closed (a slowloris client cannot hold a connection and a task forever).
//!   hyper enforces it with the connection's own timer (`head_timer.rs`: no timer entry
//!   per request). The clock starts whenever the connection waits
//!   for a request's headers, so an idle keep-alive connection is closed after the same
//!   time. A slow body is bounded by the router's request timeout instead (`408`);
//! - a client must read its answers: a write that makes no progress for the same
//!   `header_read_timeout` closes the connection (`write_stall.rs`; a client that sends
//!   requests and never reads cannot hold a connection, a task and its buffers either);
//! - at most `max_connections` open at once (a connection past the cap is closed at once);
//! - hyper reads a request head of at most `max_head_bytes` (`431` past it, from hyper
//!   itself); the router's own header limit answers below that in JSON.
//!
//! On shutdown the loop stops accepting and every connection finishes its in-flight
//! request, then closes.

use std::convert::Infallible;
use std::future::{pending, Future};
use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, Response};
use axum::{BoxError, Router};
use http_body_util::{Either, Full};
use hyper::body::{Body as HttpBody, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tower::{Service, ServiceExt as _};

use super::error::ApiError;
use super::head_timer::HeadTimer;
use super::router::head_too_large;
use super::write_stall::Watched;
use crate::accept::{accept_loop, drive};
use crate::app::App;
use crate::settings::Settings;
use crate::threads::ConnectionThreads;
use crate::tls::Tls;

/// Routes a listener answers itself, before its router (`weir serve`'s decision hot
/// paths): no route lookup, no request extensions, no boxed future or body. The listener
/// asks each request for its route; the router gets every request that has none.
pub trait Direct: Clone + Send + Sync + 'static {
    /// Which of the direct routes a request takes.
    type Route: Copy + Send;

    /// The direct route `request` takes; `None`: the router's.
    fn route(&self, request: &Request<Incoming>) -> Option<Self::Route>;

    /// The answer to `request` on its direct `route`.
    fn answer(
        &self,
        route: Self::Route,
        request: Request<Incoming>,
    ) -> impl Future<Output = Response<Full<Bytes>>> + Send;
}

/// No direct routes: every request goes to the router.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoDirect;

impl Direct for NoDirect {
    type Route = Infallible;

    fn route(&self, _: &Request<Incoming>) -> Option<Infallible> {
        None
    }

    async fn answer(&self, route: Infallible, _: Request<Incoming>) -> Response<Full<Bytes>> {
        match route {}
    }
}

/// What the listener records of each connection on its requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Peer {
    /// Nothing (the decision server's API keys nothing by peer).
    #[default]
    Unrecorded,
    /// The TCP peer's `SocketAddr`, in every request's extensions (what `weir proxy` and
    /// `weir_tower::peer_addr` read).
    Recorded,
}

/// The bounds of one HTTP listener.
///
/// ```
/// use std::time::Duration;
/// use weir_listen::{HttpLimits, Settings};
///
/// let settings = Settings::default();
/// let limits = HttpLimits::of(&settings); // what `weir serve` applies
/// assert_eq!(limits.max_connections.map(|n| n.get()), Some(4096));
/// let bare = HttpLimits::new(Duration::from_secs(10)); // what `serve_http` applies
/// assert_eq!(bare.max_connections, None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpLimits {
    /// How long a client may take to send a request's headers, how long an idle
    /// keep-alive connection stays open, and how long an answer's writes may make no
    /// progress (the client reads none of it).
    pub header_read_timeout: Duration,
    /// The most connections open at once; one past it is closed as soon as it is accepted.
    /// `None`: no cap.
    pub max_connections: Option<NonZeroUsize>,
    /// The longest request head (request line and headers) hyper reads before answering
    /// `431` (at least 8 KiB). `None`: hyper's default (about 400 KiB).
    pub max_head_bytes: Option<usize>,
    /// Where connections run: on these threads, or (`None`) on the caller's runtime.
    pub threads: Option<ConnectionThreads>,
}

impl HttpLimits {
    /// Only the header-read timeout: no connection cap, hyper's head size.
    pub fn new(header_read_timeout: Duration) -> Self {
        Self {
            header_read_timeout,
            max_connections: None,
            max_head_bytes: None,
            threads: None,
        }
    }

    /// The bounds `settings` asks for: its header-read timeout, its connection cap, and a
    /// head of at most twice its header limit (so that the router, not hyper, answers a
    /// request whose headers are just past the limit).
    pub fn of(settings: &Settings) -> Self {
        Self {
            header_read_timeout: settings.header_read_timeout,
            max_connections: Some(settings.max_connections),
            max_head_bytes: Some(settings.max_header_bytes.saturating_mul(2)),
            threads: settings.connection_threads.clone(),
        }
    }
}

/// hyper refuses a smaller read buffer (it panics).
const MIN_HEAD_BYTES: usize = 8 * 1024;

/// Serves `router` on `listener` until `shutdown` completes, then waits for the open
/// connections to finish their in-flight requests, with only the header-read timeout as a
/// bound (no connection cap: see [`serve_http_with`] and [`HttpLimits::of`]).
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    peer_info: Peer,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_http_with(
        listener,
        router,
        HttpLimits::new(header_read_timeout),
        peer_info,
        shutdown,
    )
    .await
}

/// Serves `router` on `listener` within `limits` until `shutdown` completes, then waits
/// for the open connections to finish their in-flight requests. `weir serve` and
/// `weir proxy` both accept connections here.
pub async fn serve_http_with(
    listener: TcpListener,
    router: Router,
    limits: HttpLimits,
    peer_info: Peer,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_http_tls(
        listener, router, NoDirect, limits, peer_info, None, shutdown,
    )
    .await
}

/// Serves any `tower` service on `listener` within `limits`, as [`serve_http_with`] serves
/// a router: the same accept loop, connection cap, header-read timeout and head size, the
/// same graceful shutdown. No router, no boxed body: each request reaches `service` as
/// hyper read it (`Request<Incoming>`, the body streaming), with the peer's `SocketAddr`
/// in its extensions when `peer_info` is [`Peer::Recorded`], and its response goes back as
/// `service` built it. `weir proxy` serves its proxy listener here.
///
/// The router's own bounds are not applied (the request timeout, the body limit, the JSON
/// `431` below hyper's): a service that wants the header limit calls [`header_limit`].
/// Each request is served by a clone of `service`, readied then called (`oneshot`), as
/// tower's contract asks.
///
/// ```no_run
/// use std::convert::Infallible;
/// use http_body_util::Full;
/// use hyper::body::{Bytes, Incoming};
/// use weir_listen::{serve_service_with, HttpLimits, Peer};
///
/// # async fn demo() -> std::io::Result<()> {
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let hello = tower::service_fn(|_: axum::http::Request<Incoming>| async {
///     Ok::<_, Infallible>(axum::http::Response::new(Full::new(Bytes::from_static(b"ok"))))
/// });
/// let limits = HttpLimits::new(std::time::Duration::from_secs(10));
/// serve_service_with(listener, hello, limits, Peer::Recorded, std::future::pending()).await
/// # }
/// ```
pub async fn serve_service_with<S, B>(
    listener: TcpListener,
    service: S,
    limits: HttpLimits,
    peer_info: Peer,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()>
where
    S: Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    serve_connections(listener, limits, None, shutdown, move |peer| {
        let service = service.clone();
        service_fn(move |mut request: Request<Incoming>| {
            if peer_info == Peer::Recorded {
                request.extensions_mut().insert(peer);
            }
            service.clone().oneshot(request)
        })
    })
    .await
}

/// The `431` the router and `weir serve`'s direct routes answer (a JSON error naming the
/// size and the limit) when a request's header names and values add up to more than
/// `app`'s [`Settings::max_header_bytes`]; `None` within it. For a service served with
/// [`serve_service_with`], which has no router to apply it (hyper's own `431` comes only
/// past [`HttpLimits::max_head_bytes`]).
pub fn header_limit(app: &App, headers: &HeaderMap) -> Option<Response<Full<Bytes>>> {
    head_too_large(app, headers).map(ApiError::into_full)
}

/// [`serve_http_with`], over TLS when `tls` is given (the handshake is each connection's,
/// bounded by [`HANDSHAKE_TIMEOUT`](crate::HANDSHAKE_TIMEOUT); a client that fails it is
/// dropped). The requests `direct` takes are answered by it (`weir serve`'s decision hot
/// paths), every other request by `router`.
#[allow(clippy::too_many_arguments)]
pub async fn serve_http_tls<D: Direct>(
    listener: TcpListener,
    router: Router,
    direct: D,
    limits: HttpLimits,
    peer_info: Peer,
    tls: Option<Tls>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    serve_connections(listener, limits, tls, shutdown, move |peer| {
        let router = router.clone();
        let direct = direct.clone();
        service_fn(move |request: Request<Incoming>| {
            let router = router.clone();
            let direct = direct.clone();
            async move {
                if let Some(route) = direct.route(&request) {
                    let answer = direct.answer(route, request).await;
                    return Ok::<_, Infallible>(answer.map(Either::Left));
                }
                let mut request = request.map(Body::new);
                if peer_info == Peer::Recorded {
                    request.extensions_mut().insert(peer);
                }
                let response = match router.oneshot(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok(response.map(Either::Right))
            }
        })
    })
    .await
}

/// The one accept loop of every HTTP listener: each connection `listener` takes (within
/// the cap) is served by hyper's HTTP/1 server, under the header-read timeout on its own
/// timer and the head size of `limits`, over TLS when `tls` is given, with the service
/// `service_for` makes for its peer; on `shutdown`, in-flight requests finish. A service
/// that answers a protocol upgrade with `101` takes the connection's socket over
/// (`hyper::upgrade::on`, what `weir proxy` does for a WebSocket); from then on the socket
/// is outside this loop's connection cap and shutdown, and the service bounds it.
async fn serve_connections<M, H, B>(
    listener: TcpListener,
    limits: HttpLimits,
    tls: Option<Tls>,
    shutdown: impl Future<Output = ()>,
    mut service_for: M,
) -> io::Result<()>
where
    M: FnMut(SocketAddr) -> H,
    H: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send + 'static,
    H::Future: Send + 'static,
    H::Error: Into<BoxError>,
    B: HttpBody + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let mut builder = http1::Builder::new();
    builder.header_read_timeout(limits.header_read_timeout);
    if let Some(max) = limits.max_head_bytes {
        builder.max_buf_size(max.max(MIN_HEAD_BYTES));
    }
    accept_loop(
        listener,
        "HTTP",
        limits.max_connections,
        limits.threads.clone(),
        shutdown,
        move |stream, peer, stop| {
            let service = service_for(peer);
            let head_timer = HeadTimer::default();
            let mut builder = builder.clone();
            builder.timer(head_timer.clone());
            let tls = tls.clone();
            // HTTP/1's idle bound is the header-read timeout, which hyper enforces on this
            // connection's own timer; the timer's watcher runs beside the connection for its
            // whole life, the graceful close included, and never completes (no idle close of
            // its own). It also bounds a write the client does not read (`write_stall.rs`).
            let writes = head_timer.clone();
            let watch = head_timer.watch(limits.header_read_timeout);
            async move {
                let stream = match stream.open() {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::debug!(%peer, %error, "connection dropped: its socket could not be watched");
                        return;
                    }
                };
                match tls {
                    None => {
                        let stream = Watched::new(stream, writes);
                        let connection = builder
                            .serve_connection(TokioIo::new(stream), service)
                            .with_upgrades();
                        drive(connection, stop, watch, pending(), Duration::ZERO, peer).await;
                    }
                    Some(tls) => {
                        if let Some(stream) = crate::tls::handshake(&tls, stream, peer).await {
                            let stream = Watched::new(stream, writes);
                            let connection = builder
                                .serve_connection(TokioIo::new(stream), service)
                                .with_upgrades();
                            drive(connection, stop, watch, pending(), Duration::ZERO, peer).await;
                        }
                    }
                }
            }
        },
    )
    .await
}
