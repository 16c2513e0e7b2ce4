//! A backend that collapses under concurrency, as a real process on loopback, for
//! `scripts/bench-adaptive` (BENCHMARKS.md, "Adaptive in-flight limit"): the knee model of
//! `weir_core::adaptive::Knee`. Up to KNEE requests inside, each takes BASE; past it every
//! request slows so much that throughput falls: with KNEE 8 and BASE 20 ms, 400 requests/s
//! at 8 inside (its best), about 210/s at 64. A request's latency is set by how many are
//! inside when it comes in; it waits (tokio's timer), using no CPU. `GET /__stats` answers
//! the requests completed so far (the goodput is counted here, at the backend).
//!
//! ```text
//! cargo run --release -p weir-proxy --example knee_backend -- 127.0.0.1:18300 8 20
//! ```

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1 as server;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use weir_core::adaptive::Knee;

#[derive(Default)]
struct Counts {
    inside: AtomicUsize,
    completed: AtomicU64,
}

/// One request inside; dropped, it leaves.
struct Inside<'a>(&'a AtomicUsize);

impl Drop for Inside<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn serve(
    knee: Knee,
    counts: Arc<Counts>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    if request.uri().path() == "/__stats" {
        let completed = counts.completed.load(Ordering::SeqCst);
        return Ok(Response::new(Full::new(Bytes::from(format!(
            "{completed}\n"
        )))));
    }
    let n = counts.inside.fetch_add(1, Ordering::SeqCst) + 1;
    // Leaves the count however the request ends (a client that hangs up mid-request
    // included: its future is dropped), so a run's leftovers never slow the next.
    let _inside = Inside(&counts.inside);
    tokio::time::sleep(knee.latency(n)).await;
    counts.completed.fetch_add(1, Ordering::SeqCst);
    Ok(Response::new(Full::new(Bytes::from_static(b"ok\n"))))
}

fn main() -> std::io::Result<()> {
    let mut args = std::env::args().skip(1);
    let listen = args.next().unwrap_or_else(|| "127.0.0.1:18300".to_string());
    let knee = args.next().and_then(|k| k.parse().ok()).unwrap_or(8);
    let base_ms = args.next().and_then(|b| b.parse().ok()).unwrap_or(20);
    let knee = Knee {
        knee,
        base: Duration::from_millis(base_ms),
    };
    let counts = Arc::new(Counts::default());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(&listen).await?;
            eprintln!(
                "knee_backend on {listen}: best {} in flight at {:?} each",
                knee.knee, knee.base
            );
            loop {
                let (stream, _) = listener.accept().await?;
                let _ = stream.set_nodelay(true);
                let counts = Arc::clone(&counts);
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request| serve(knee, Arc::clone(&counts), request));
                    let _ = server::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        })
}
