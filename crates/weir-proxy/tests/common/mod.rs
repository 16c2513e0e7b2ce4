//! The proxy tests' parts: a recording backend (counts requests in flight, records arrival
//! times on the system clock, optionally slow, or stalling mid-response), a proxy started
//! on 127.0.0.1:0 with inline rules, and a small HTTP client; a raw-socket client
//! (`raw`) and log capture (`logs`). Every server stops when its test's runtime ends.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use bytes::Bytes;
use http::{HeaderMap, Response};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::net::TcpListener;
use weir_core::{Clock, SystemClock};
use weir_engine::RuleSource;
use weir_proxy::{ProxySettings, Upstream};

pub mod logs;
pub mod raw;

/// A backend that answers `name`, after `delay`, recording what it saw.
#[derive(Clone)]
pub struct Backend {
    pub addr: SocketAddr,
    pub record: Arc<Record>,
}

#[derive(Default)]
pub struct Record {
    pub in_flight: AtomicUsize,
    pub peak: AtomicUsize,
    pub arrivals_ns: Mutex<Vec<u64>>,
    pub last_headers: Mutex<Option<HeaderMap>>,
    /// The request targets (path and query) in the order they arrived.
    pub targets: Mutex<Vec<String>>,
}

impl Record {
    pub fn count(&self) -> usize {
        self.arrivals_ns.lock().unwrap().len()
    }

    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// The most arrivals inside any window of `window`.
    pub fn max_in_any(&self, window: Duration) -> usize {
        let mut t = self.arrivals_ns.lock().unwrap().clone();
        t.sort_unstable();
        let w = u64::try_from(window.as_nanos()).unwrap();
        let mut best = 0;
        let mut start = 0;
        for end in 0..t.len() {
            while t[end] - t[start] >= w {
                start += 1;
            }
            best = best.max(end - start + 1);
        }
        best
    }

    pub fn sorted_arrivals(&self) -> Vec<u64> {
        let mut t = self.arrivals_ns.lock().unwrap().clone();
        t.sort_unstable();
        t
    }
}

pub async fn backend(name: &'static str, delay: Duration) -> Backend {
    serve_backend(name, delay, Ending::Complete).await
}

/// A backend that records like [`backend`], answers 200 and sends `name` as the first
/// part of its body, then nothing more, never ending the body (until the test ends).
pub async fn stalling_backend(name: &'static str) -> Backend {
    serve_backend(name, Duration::ZERO, Ending::Stall).await
}

#[derive(Clone, Copy)]
enum Ending {
    Complete,
    Stall,
}

/// A response body: one data frame, then pending for ever.
struct Stall(Option<Bytes>);

impl hyper::body::Body for Stall {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        match self.0.take() {
            Some(data) => std::task::Poll::Ready(Some(Ok(hyper::body::Frame::data(data)))),
            None => std::task::Poll::Pending,
        }
    }
}

async fn serve_backend(name: &'static str, delay: Duration, ending: Ending) -> Backend {
    let record = Arc::new(Record::default());
    let clock = SystemClock::new();
    let handler_record = Arc::clone(&record);
    let app = Router::new().fallback(move |request: Request| {
        let record = Arc::clone(&handler_record);
        let clock = clock;
        async move {
            record.arrivals_ns.lock().unwrap().push(clock.now_ns());
            *record.last_headers.lock().unwrap() = Some(request.headers().clone());
            record
                .targets
                .lock()
                .unwrap()
                .push(request.uri().to_string());
            let now = record.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            record.peak.fetch_max(now, Ordering::SeqCst);
            let body = request
                .into_body()
                .collect()
                .await
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            record.in_flight.fetch_sub(1, Ordering::SeqCst);
            let text = if body.is_empty() {
                name.to_string()
            } else {
                format!("{name}:{}", String::from_utf8_lossy(&body))
            };
            let body = match ending {
                Ending::Complete => Body::from(text),
                Ending::Stall => Body::new(Stall(Some(Bytes::from(text)))),
            };
            Response::builder()
                .header("x-backend", name)
                .header("connection", "keep-alive")
                .header("keep-alive", "timeout=5")
                .body(body)
                .unwrap()
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Backend { addr, record }
}

pub fn upstream(b: &Backend) -> Upstream {
    format!("http://{}", b.addr).parse().unwrap()
}

/// Proxy settings around `upstream` with `rules` (YAML, domain `proxy`) and a quiet reload.
pub fn settings(upstream: Upstream, rules: &'static str) -> ProxySettings {
    let mut s = ProxySettings::new(upstream);
    s.server.engine.rules = RuleSource::Inline {
        name: "test.yaml",
        yaml: rules,
    };
    s.upstream_timeout = Duration::from_secs(5);
    s.shutdown_grace = Duration::from_secs(5);
    s
}

pub struct Proxy {
    pub addr: SocketAddr,
    pub api: SocketAddr,
    pub stop: tokio::sync::oneshot::Sender<()>,
    pub task: tokio::task::JoinHandle<Result<(), weir_proxy::ProxyError>>,
}

/// A proxy without limits in front of a recording backend answering `app`.
pub async fn open_proxy() -> (Backend, Proxy) {
    let b = backend("app", Duration::ZERO).await;
    let p = proxy(settings(upstream(&b), "domain: proxy\n")).await;
    (b, p)
}

pub async fn proxy(settings: ProxySettings) -> Proxy {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (addr, api_addr) = (listener.local_addr().unwrap(), api.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(weir_proxy::run(settings, listener, api, async move {
        let _ = stopped.await;
    }));
    // Ready when the API answers.
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(api_addr).await.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Proxy {
        addr,
        api: api_addr,
        stop,
        task,
    }
}

pub type HttpClient = Client<HttpConnector, Full<Bytes>>;

pub fn client() -> HttpClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A finished response: status, headers and body text.
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", |v| v.to_str().unwrap())
    }
}

pub async fn send(
    client: &HttpClient,
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = http::Request::builder()
        .method(method)
        .uri(format!("http://{addr}{path}"));
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let request = request
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = tokio::time::timeout(Duration::from_secs(10), client.request(request))
        .await
        .expect("the proxy answered within 10 s")
        .unwrap();
    let status = response.status().as_u16();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Answer {
        status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

pub async fn get(
    client: &HttpClient,
    addr: SocketAddr,
    path: &str,
    headers: &[(&str, &str)],
) -> Answer {
    send(client, addr, "GET", path, headers, "").await
}

/// The admin token of the tests that read the dashboard.
pub const TOKEN: &str = "test-admin-token-0123456789";

/// The dashboard's data (`/dashboard/data` on the API listener, with [`TOKEN`]).
pub async fn dashboard(c: &HttpClient, api: SocketAddr) -> serde_json::Value {
    let bearer = format!("Bearer {TOKEN}");
    let data = get(c, api, "/dashboard/data", &[("authorization", &bearer)]).await;
    assert_eq!(data.status, 200, "{}", data.body);
    serde_json::from_str(&data.body).unwrap()
}
