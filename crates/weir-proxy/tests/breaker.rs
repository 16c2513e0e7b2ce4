//! The upstream circuit breakers end to end, on real sockets, under a `ManualClock` (the
//! engine's, which the breakers read): a backend on loopback that starts failing (5xx,
//! then slow: it moves the manual clock on while it answers, so a call takes as long as
//! the test says, without a sleep) opens its upstream's breaker; while open, calls get
//! `503` with `Retry-After` (the time left) and never reach it, or go to the fallback
//! upstream; once the backend recovers, half-open probes close it again. An unreachable
//! upstream (connect errors) opens it too; the client's own 4xx never do. The metrics and
//! the dashboard's data show each breaker.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use common::raw::exchange;
use common::{client, dashboard, get, proxy, settings, Answer, HttpClient, TOKEN};
use http::{Response, StatusCode};
use weir_core::ManualClock;
use weir_engine::SharedClock;
use weir_listen::AdminToken;
use weir_proxy::{BreakerSettings, ProxySettings, Upstream};

/// How the backend answers now.
const OK: u8 = 0;
const FAIL: u8 = 1;
const SLOW: u8 = 2;
const NOT_FOUND: u8 = 3;

/// A backend whose behaviour the test switches; it counts the requests it saw.
struct Backend {
    addr: SocketAddr,
    mode: Arc<AtomicU8>,
    hits: Arc<AtomicUsize>,
}

impl Backend {
    async fn start(name: &'static str, clock: ManualClock) -> Self {
        let mode = Arc::new(AtomicU8::new(OK));
        let hits = Arc::new(AtomicUsize::new(0));
        let (m, h) = (Arc::clone(&mode), Arc::clone(&hits));
        // It reads the request's body first, as most backends do.
        let app = Router::new().fallback(move |_body: axum::body::Bytes| {
            let (mode, hits, clock) = (Arc::clone(&m), Arc::clone(&h), clock.clone());
            async move {
                hits.fetch_add(1, Ordering::SeqCst);
                let status = match mode.load(Ordering::SeqCst) {
                    FAIL => StatusCode::INTERNAL_SERVER_ERROR,
                    NOT_FOUND => StatusCode::NOT_FOUND,
                    SLOW => {
                        // Two seconds pass on the proxy's clock while this call is inside.
                        clock.advance(Duration::from_secs(2));
                        StatusCode::OK
                    }
                    _ => StatusCode::OK,
                };
                Response::builder()
                    .status(status)
                    .body(axum::body::Body::from(name))
                    .unwrap()
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, mode, hits }
    }

    fn set(&self, mode: u8) {
        self.mode.store(mode, Ordering::SeqCst);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }

    fn upstream(&self) -> Upstream {
        format!("http://{}", self.addr).parse().unwrap()
    }
}

/// 50 % failed or 50 % slower than 1 s, of at least 4 calls in 10 s, opens for 30 s; two
/// probes.
fn breaker() -> BreakerSettings {
    let mut b = BreakerSettings::default();
    b.error_ratio = 0.5;
    b.slow_call = Duration::from_secs(1);
    b.slow_ratio = 0.5;
    b.window = Duration::from_secs(10);
    b.min_calls = 4;
    b.open_for = Duration::from_secs(30);
    b.probes = 2;
    b
}

fn with_breaker(upstream: Upstream, clock: &ManualClock) -> ProxySettings {
    let mut s = settings(upstream, "domain: proxy\n");
    s.server.engine.clock = SharedClock::new(clock.clone());
    s.server.admin_token = Some(AdminToken::new(TOKEN).unwrap());
    s.breaker = Some(breaker());
    s
}

async fn statuses(c: &HttpClient, addr: SocketAddr, n: usize) -> Vec<u16> {
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(get(c, addr, "/", &[]).await.status);
    }
    out
}

/// The `503` an open breaker answers: `Retry-After` and a body saying the backend is
/// unavailable.
fn assert_unavailable(answer: &Answer, retry_after: &str) {
    assert_eq!(answer.status, 503, "{}", answer.body);
    assert_eq!(answer.header("retry-after"), retry_after, "{}", answer.body);
    assert!(
        answer.body.contains("the backend is unavailable")
            && answer.body.contains("circuit breaker is open"),
        "{}",
        answer.body
    );
}

/// The line of `/metrics` for `series` (`name{labels}`), its value.
async fn metric(c: &HttpClient, api: SocketAddr, series: &str) -> String {
    let text = get(c, api, "/metrics", &[]).await.body;
    text.lines()
        .find_map(|l| l.strip_prefix(series).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no {series} in:\n{text}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_then_slow_backend_opens_its_breaker_and_probes_close_it_once_it_recovers() {
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let b = Backend::start("app", clock.clone()).await;
    let up = b.upstream();
    let p = proxy(with_breaker(up.clone(), &clock)).await;
    let c = client();

    // The client's own 4xx are not the backend failing.
    b.set(NOT_FOUND);
    assert_eq!(statuses(&c, p.addr, 2).await, [404; 2]);
    b.set(OK);
    assert_eq!(statuses(&c, p.addr, 2).await, [200; 2]);

    // 5xx: 3 of 7 failed is below half; the fourth failure is half.
    b.set(FAIL);
    assert_eq!(statuses(&c, p.addr, 4).await, [500; 4]);
    let seen = b.hits();
    let refused = get(&c, p.addr, "/", &[]).await;
    assert_unavailable(&refused, "30");
    clock.advance(Duration::from_millis(12_500));
    assert_unavailable(&get(&c, p.addr, "/", &[]).await, "18");
    assert_eq!(b.hits(), seen, "no call reached the backend while open");
    let state = format!("weir_upstream_breaker_state{{upstream=\"{up}\"}}");
    assert_eq!(metric(&c, p.api, &state).await, "1");

    // Still failing when the wait is over: the first probe fails, and it opens again.
    clock.advance(Duration::from_millis(17_500));
    assert_eq!(metric(&c, p.api, &state).await, "2", "half-open");
    assert_eq!(get(&c, p.addr, "/", &[]).await.status, 500);
    assert_unavailable(&get(&c, p.addr, "/", &[]).await, "30");

    // Recovered: two probes succeed and it closes.
    b.set(OK);
    clock.advance(Duration::from_secs(30));
    assert_eq!(statuses(&c, p.addr, 3).await, [200; 3]);
    assert_eq!(metric(&c, p.api, &state).await, "0");

    // Slow: every call takes 2 s (over the 1 s threshold) and succeeds; with the one fast
    // call since it closed, a second slow one is half of 3 calls (too few), a third opens it.
    b.set(SLOW);
    assert_eq!(statuses(&c, p.addr, 3).await, [200; 3]);
    let seen = b.hits();
    assert_unavailable(&get(&c, p.addr, "/", &[]).await, "30");
    assert_eq!(b.hits(), seen);

    // Fast again: probes close it.
    b.set(OK);
    clock.advance(Duration::from_secs(30));
    assert_eq!(statuses(&c, p.addr, 2).await, [200; 2]);
    assert_eq!(metric(&c, p.api, &state).await, "0");

    let transitions = |to: &str| {
        format!("weir_upstream_breaker_transitions_total{{upstream=\"{up}\",to=\"{to}\"}}")
    };
    assert_eq!(metric(&c, p.api, &transitions("open")).await, "3");
    assert_eq!(metric(&c, p.api, &transitions("half_open")).await, "3");
    assert_eq!(metric(&c, p.api, &transitions("closed")).await, "2");
    let rejected = format!("weir_upstream_breaker_rejected_total{{upstream=\"{up}\"}}");
    assert_eq!(metric(&c, p.api, &rejected).await, "4");
    let _ = p.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_an_unreachable_upstream_is_open_its_calls_go_to_the_fallback() {
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    // Nothing listens there: every call is a connect error (502).
    let dead: Upstream = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
            .parse()
            .unwrap()
    };
    let fallback = Backend::start("fallback", clock.clone()).await;
    let mut s = with_breaker(dead.clone(), &clock);
    s.fallback_upstream = Some(fallback.upstream());
    let p = proxy(s).await;
    let c = client();

    assert_eq!(statuses(&c, p.addr, 4).await, [502; 4]);
    assert_eq!(fallback.hits(), 0, "closed: calls go where they were sent");
    for _ in 0..3 {
        let answer = get(&c, p.addr, "/", &[]).await;
        assert_eq!((answer.status, answer.body.as_str()), (200, "fallback"));
    }
    assert_eq!(fallback.hits(), 3);

    // The dashboard shows both breakers: the dead upstream's open, the fallback's closed.
    let data = dashboard(&c, p.api).await;
    let upstreams = data["panels"]["upstreams"].as_array().unwrap();
    let of = |u: &Upstream| {
        upstreams
            .iter()
            .find(|v| v["upstream"] == u.to_string())
            .unwrap_or_else(|| panic!("{u} in {upstreams:?}"))
    };
    assert_eq!(of(&dead)["state"], "open");
    assert_eq!(of(&dead)["open_remaining_ms"], 30_000);
    assert_eq!(of(&dead)["rejected"], 3);
    assert_eq!(of(&fallback.upstream())["state"], "closed");
    assert_eq!(of(&fallback.upstream())["window_calls"], 3);

    // The fallback failing too: 3 of its 6 calls fail, it opens in turn, and then there
    // is nowhere to go.
    fallback.set(FAIL);
    assert_eq!(statuses(&c, p.addr, 3).await, [500; 3]);
    assert_unavailable(&get(&c, p.addr, "/", &[]).await, "30");
    let _ = p.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_breakers_off_a_failing_backend_is_always_called() {
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let b = Backend::start("app", clock.clone()).await;
    let mut s = with_breaker(b.upstream(), &clock);
    s.breaker = None;
    let p = proxy(s).await;
    let c = client();
    b.set(FAIL);
    assert_eq!(statuses(&c, p.addr, 30).await, [500; 30]);
    assert_eq!(b.hits(), 30);
    let text = get(&c, p.api, "/metrics", &[]).await.body;
    assert!(!text.contains("weir_upstream_breaker_state{"), "{text}");
    let _ = p.stop.send(());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_breaker_knob_stops_the_start_naming_it() {
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let b = Backend::start("app", clock.clone()).await;
    let mut s = with_breaker(b.upstream(), &clock);
    let mut knobs = breaker();
    knobs.probes = 0;
    s.breaker = Some(knobs);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let e = weir_proxy::run(s, listener, api, std::future::pending())
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "breaker probes must be above zero");
}

/// A chunk, then a chunk size that is not hexadecimal: the client's `400`.
const BROKEN_BODY: &[u8] = b"POST /upload HTTP/1.1\r\nhost: weir.test\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\nmore\r\n0\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_broken_bodies_neither_count_nor_hold_the_probe_slots() {
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let b = Backend::start("app", clock.clone()).await;
    let up = b.upstream();
    let p = proxy(with_breaker(up.clone(), &clock)).await;
    let c = client();
    for _ in 0..6 {
        exchange(p.addr, BROKEN_BODY)
            .await
            .expect(400, "bad request body");
    }
    let data = dashboard(&c, p.api).await;
    let view = &data["panels"]["upstreams"][0];
    assert_eq!(
        (view["state"].as_str(), view["window_calls"].as_u64()),
        (Some("closed"), Some(0)),
        "{view}"
    );

    b.set(FAIL);
    assert_eq!(statuses(&c, p.addr, 4).await, [500; 4]);
    clock.advance(Duration::from_secs(30));
    // Half-open, two probe slots: three broken bodies each take one and give it back.
    for _ in 0..3 {
        exchange(p.addr, BROKEN_BODY)
            .await
            .expect(400, "bad request body");
    }
    b.set(OK);
    assert_eq!(statuses(&c, p.addr, 2).await, [200; 2]);
    let state = format!("weir_upstream_breaker_state{{upstream=\"{up}\"}}");
    assert_eq!(metric(&c, p.api, &state).await, "0", "the probes closed it");
    let _ = p.stop.send(());
}
