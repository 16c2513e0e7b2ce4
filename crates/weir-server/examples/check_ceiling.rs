//! The HTTP ceiling of `POST /v1/check` itself, for `scripts/bench-cpu`: plain hyper (no
//! router, no JSON parsing, no decision) on 2 tokio workers, reading each request's body
//! whole and answering with the bytes `weir serve` sends for an allowed `/v1/check` (the
//! same status line, the same headers, a body of the same length). What this server costs
//! a request is what the exchange itself costs on this stack, below anything Weir can do;
//! what `weir serve` costs above it is Weir's own work (issue 14, docs/benchmarks-history.md "Hot
//! paths").
//!
//! ```text
//! cargo run --release -p weir-server --example check_ceiling -- 127.0.0.1:18190
//! # the same, busy for 2000 ns of its own after reading each body: the ceiling made to use
//! # about weir serve's user time (docs/benchmarks-history.md, "`/v1/check`'s kernel time
//! # follows its user time")
//! cargo run --release -p weir-server --example check_ceiling -- 127.0.0.1:18190 2000
//! ```

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// `weir serve`'s body for an allowed request of the built-in example rules.
const BODY: &str = r#"{"overall_code":"OK","descriptors":[{"code":"OK","rule":"api.remote_address","name":"per_ip","limit":40,"remaining":39,"reset_after_ms":50,"retry_after_ms":0}]}"#;

async fn answer(
    request: Request<Incoming>,
    spin: std::time::Duration,
) -> Result<Response<Full<Bytes>>, Infallible> {
    // Read the body whole, as Weir must before it can decide.
    let _ = request.into_body().collect().await;
    if !spin.is_zero() {
        // Busy, not asleep: user time a request, as a decision would take.
        #[allow(clippy::disallowed_methods)] // a benchmark's own busy-wait, no decision
        let started = std::time::Instant::now();
        while started.elapsed() < spin {
            std::hint::spin_loop();
        }
    }
    let mut response = Response::new(Full::new(Bytes::from_static(BODY.as_bytes())));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        HeaderName::from_static("ratelimit-policy"),
        HeaderValue::from_static("\"api.remote_address\";q=40;w=2"),
    );
    headers.insert(
        HeaderName::from_static("ratelimit"),
        HeaderValue::from_static("\"api.remote_address\";r=39;t=1"),
    );
    Ok(response)
}

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18190".to_string());
    // Nanoseconds to stay busy a request (default 0: the ceiling itself).
    let spin = match std::env::args().nth(2).map(|n| n.parse::<u64>()) {
        None => std::time::Duration::ZERO,
        Some(Ok(ns)) => std::time::Duration::from_nanos(ns),
        Some(Err(error)) => {
            eprintln!(
                "check_ceiling: the second argument is nanoseconds to spin a request: {error}"
            );
            std::process::exit(2);
        }
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(&addr).await?;
            eprintln!("check_ceiling listening on {addr}");
            loop {
                let (stream, _) = listener.accept().await?;
                let _ = stream.set_nodelay(true);
                tokio::spawn(async move {
                    let io = TokioIo::new(stream);
                    let _ = http1::Builder::new()
                        .serve_connection(io, service_fn(move |request| answer(request, spin)))
                        .await;
                });
            }
        })
}
