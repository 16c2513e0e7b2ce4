//! Where a gRPC request enters: each connection the shared accept loop (`accept.rs`) takes
//! is served by hyper's HTTP/2 server with the RLS service (`grpc.rs`) and the gRPC health
//! service (`health.rs`) behind tonic's router. Not `tonic::transport::Server`, which closes no connection for being idle and
//! caps none: an idle or abandoned connection held a file descriptor for ever.
//!
//! - at most `max_connections` open at once (a connection past the cap is closed at once);
//! - a connection with no request in flight for `grpc_idle_timeout` is closed (GOAWAY),
//!   given `grpc_keepalive_timeout` to finish closing, then dropped;
//! - HTTP/2 keep-alive: a connection the server has heard nothing from for
//!   `grpc_keepalive_interval` is pinged, and dropped if the ping is not answered within
//!   `grpc_keepalive_timeout` (a peer that vanished is noticed);
//! - at most [`MAX_CONCURRENT_STREAMS`] requests in flight per connection, a header list
//!   of at most `max_header_bytes`, and each request bounded by `request_timeout`
//!   (`CANCELLED`, as tonic's own timeout answered).
//!
//! On shutdown the loop stops accepting and every connection finishes its in-flight
//! requests (GOAWAY), then closes.

use std::convert::Infallible;
use std::future::{pending, Future};
use std::io;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::Request;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tonic::service::Routes;
use tower::ServiceExt as _;
use weir_core::Clock as _;

use crate::app::App;
use crate::deadline::in_time;
use crate::grpc::{malformed_is_invalid_argument, RlsService};
use crate::health::HealthService;
use weir_listen::{accept_loop, drive, Activity};

/// Requests in flight on one connection at most (HTTP/2 `SETTINGS_MAX_CONCURRENT_STREAMS`,
/// hyper's default): Envoy opens another connection past it.
pub(crate) const MAX_CONCURRENT_STREAMS: u32 = 200;

/// Serves the RLS service of `app` on `listener` until `shutdown` completes, then waits
/// for the open connections to finish their in-flight requests.
pub(crate) async fn serve_grpc(
    listener: TcpListener,
    app: App,
    tls: Option<weir_listen::Tls>,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let settings = app.settings().clone();
    let clock = app.engine().limiter().clock().clone();
    let routes = Routes::new(RlsService::server(app.clone()))
        .add_service(HealthService::server(app))
        .prepare();
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(settings.grpc_keepalive_interval)
        .keep_alive_timeout(settings.grpc_keepalive_timeout)
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(u32::try_from(settings.max_header_bytes).unwrap_or(u32::MAX));
    let limit = settings.request_timeout;
    accept_loop(
        listener,
        "gRPC",
        Some(settings.max_connections),
        settings.connection_threads.clone(),
        shutdown,
        move |stream, peer, stop| {
            let activity = Arc::new(Activity::default());
            let requests = Arc::clone(&activity);
            let routes = routes.clone();
            let clock = clock.clone();
            let service = tower::service_fn(move |request: Request<Incoming>| {
                let in_flight = requests.start();
                let call = routes.clone().oneshot(request);
                let clock = clock.clone();
                async move {
                    let start_ns = clock.now_ns();
                    let elapsed = || Duration::from_nanos(clock.now_ns().saturating_sub(start_ns));
                    let response = match in_time(limit, elapsed, std::pin::pin!(call)).await {
                        Some(Ok(response)) => malformed_is_invalid_argument(response),
                        Some(Err(never)) => match never {},
                        None => tonic::Status::cancelled(format!(
                            "request took longer than {} ms",
                            limit.as_millis()
                        ))
                        .into_http(),
                    };
                    drop(in_flight);
                    Ok::<_, Infallible>(response)
                }
            });
            let service = TowerToHyperService::new(service);
            let builder = builder.clone();
            let tls = tls.clone();
            let idle = settings.grpc_idle_timeout;
            let grace = settings.grpc_keepalive_timeout;
            async move {
                let stream = match stream.open() {
                    Ok(stream) => stream,
                    Err(error) => {
                        tracing::debug!(%peer, %error, "connection dropped: its socket could not be watched");
                        return;
                    }
                };
                let idle = activity.idle_for(idle);
                match tls {
                    None => {
                        let connection = builder.serve_connection(TokioIo::new(stream), service);
                        drive(connection, stop, pending(), idle, grace, peer).await;
                    }
                    Some(tls) => {
                        if let Some(stream) = weir_listen::tls_handshake(&tls, stream, peer).await {
                            let connection =
                                builder.serve_connection(TokioIo::new(stream), service);
                            drive(connection, stop, pending(), idle, grace, peer).await;
                        }
                    }
                }
            }
        },
    )
    .await
}
