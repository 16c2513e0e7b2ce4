//! The ceiling of a reverse proxy on Weir's stack, for the proxy's figures (BENCHMARKS.md,
//! "Hot paths, third round"): plain hyper on 2 tokio workers, forwarding every request to
//! one upstream and streaming both bodies back, and nothing else: no limits, no decision,
//! no header rewriting, no timeouts, no pool (each client connection gets one upstream
//! connection of its own, opened on its first request and kept; HTTP/1 sends one request
//! at a time on it). What this costs a request is what proxying itself costs on hyper and
//! tokio; what `weir proxy` costs above it is Weir's own work (the limits, the screen, the
//! forwarding rules, the protections).
//!
//! With a third argument `per-core`, the same proxy runs one single-threaded runtime on
//! each of two threads instead, each accepting on its own `SO_REUSEPORT` socket: the
//! ceiling of the layout `weir proxy` serves connections on (`--connection-threads`).
//!
//! ```text
//! cargo run --release -p weir-proxy --example proxy_ceiling -- 127.0.0.1:18240 127.0.0.1:18220
//! cargo run --release -p weir-proxy --example proxy_ceiling -- 127.0.0.1:18240 127.0.0.1:18220 per-core
//! ```

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Incoming;
use hyper::client::conn::http1 as client;
use hyper::server::conn::http1 as server;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio::sync::Mutex;

type Body = http_body_util::combinators::UnsyncBoxBody<hyper::body::Bytes, hyper::Error>;

/// One client connection's upstream connection, opened on its first request.
type Upstream = Arc<Mutex<Option<client::SendRequest<Incoming>>>>;

async fn forward(
    upstream: Upstream,
    to: Arc<str>,
    mut request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let bad_gateway = || {
        let mut response =
            Response::new(Empty::new().map_err(|never| match never {}).boxed_unsync());
        *response.status_mut() = StatusCode::BAD_GATEWAY;
        response
    };
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_string();
    *request.uri_mut() = match Uri::try_from(path) {
        Ok(uri) => uri,
        Err(_) => return Ok(bad_gateway()),
    };
    let mut sender = upstream.lock().await;
    if sender.as_ref().is_none_or(|s| s.is_closed()) {
        let Ok(stream) = TcpStream::connect(&*to).await else {
            return Ok(bad_gateway());
        };
        let _ = stream.set_nodelay(true);
        let Ok((send, connection)) = client::handshake(TokioIo::new(stream)).await else {
            return Ok(bad_gateway());
        };
        tokio::spawn(connection);
        *sender = Some(send);
    }
    let Some(send) = sender.as_mut() else {
        return Ok(bad_gateway());
    };
    match send.send_request(request).await {
        Ok(response) => Ok(response.map(|body| body.boxed_unsync())),
        Err(_) => Ok(bad_gateway()),
    }
}

/// Accepts on `listener` and serves each connection on a task of the current runtime.
async fn serve(listener: tokio::net::TcpListener, to: Arc<str>) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        let _ = stream.set_nodelay(true);
        let to = Arc::clone(&to);
        tokio::spawn(async move {
            let upstream: Upstream = Arc::default();
            let service =
                service_fn(move |request| forward(Arc::clone(&upstream), Arc::clone(&to), request));
            let _ = server::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:18240".to_string());
    let to: Arc<str> = Arc::from(args.next().unwrap_or_else(|| "127.0.0.1:18220".to_string()));
    eprintln!("proxy_ceiling listening on {listen}, forwarding to {to}");
    if args.next().as_deref() == Some("per-core") {
        let listen = listen
            .parse()
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        return weir_testkit::per_core::serve_per_core(listen, 2, move |listener| {
            serve(listener, Arc::clone(&to))
        });
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async move { serve(tokio::net::TcpListener::bind(&listen).await?, to).await })
}
