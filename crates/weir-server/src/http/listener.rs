//! Where an HTTP request enters: the accept loop that hands each connection to hyper's
//! HTTP/1 server with the axum router as its service.
//!
//! It exists for one bound that `axum::serve` does not set: a client must finish sending
//! its request headers within `header_read_timeout`, or the connection is closed (a
//! slowloris client cannot hold a connection and a task forever). hyper enforces it with a
//! tokio timer. The clock starts whenever the connection waits for a request's headers,
//! so an idle keep-alive connection is closed after the same time. A slow body is bounded
//! by the router's request timeout instead. On shutdown the loop stops accepting and every
//! connection finishes its in-flight request, then closes.

use std::future::Future;
use std::io;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt as _;

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

/// Serves `router` on `listener` until `shutdown` completes, then waits for the open
/// connections to finish their in-flight requests. `weir serve` and `weir proxy` both
/// accept connections here.
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    header_read_timeout: Duration,
    peer_info: Peer,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let graceful = GracefulShutdown::new();
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(&error).await;
                    continue;
                }
            },
        };
        // Small answers go out at once (as axum::serve's callers usually ask).
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone().map_request(
            move |request: Request<Incoming>| {
                let mut request = request.map(Body::new);
                if peer_info == Peer::Recorded {
                    request.extensions_mut().insert(peer);
                }
                request
            },
        ));
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            if let Err(error) = connection.await {
                tracing::debug!(%peer, %error, "HTTP connection closed with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// An accept error is about one connection (the client went away) or about the process
/// (out of file descriptors): neither stops the server; the second waits a moment so the
/// loop does not spin while nothing can be accepted.
async fn accept_failed(error: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(%error, "accepting an HTTP connection failed; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}
