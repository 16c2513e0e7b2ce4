//! What the proxy's own work on a request allocates, counted by `stats_alloc`'s
//! instrumented allocator (one test in this binary, so nothing else allocates meanwhile):
//! the forwarding headers (`Forward`'s rewrite of the head before it leaves) and the
//! decision (`ProxyLimits::evaluate`: the descriptors, then the engine and the memory
//! store under `scripts/bench-proxy`'s rules). Counts are exact, unlike times: an upper
//! bound here fails on the first allocation a change adds to the request path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::alloc::System;
use std::net::SocketAddr;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bytes::BytesMut;
use http::header::{HOST, USER_AGENT};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, Request};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use weir_engine::{Engine, EngineSettings, RuleSource};
use weir_proxy::{probe, Class, ProxyLimits};
use weir_tower::{ClientIp, Limits as _, OnLimit};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// `scripts/bench-proxy`'s rules: a per-client GCRA and a global sliding window, both
/// checked on every request, never denying.
const RULES: &str = "
domain: proxy
descriptors:
  - key: class
    value: reader
    descriptors:
      - key: remote_address
        rule: {algorithm: gcra, rate: 1000000, per: 1s, burst: 1000000}
  - key: global
    value: all
    rule: {algorithm: sliding_window, limit: 100000000, window: 1s, precision: 100ms}
";

/// The most the forwarding headers may allocate a request: one header value each for
/// `X-Real-IP`, `Forwarded` and `X-Forwarded-For`, and the header map grown once for the
/// five headers this hop adds (its indices and its entries). Before: 12.
const FORWARDING_MAX: u64 = 5;

/// The most a decision may allocate a request, the engine's and the store's included
/// (the proxy's own share: the four descriptors' entries, the answer's vector, the boxed
/// future). Before: 21.
const DECISION_MAX: u64 = 18;

/// A request as wrk sends it (`Host` only), from a peer on loopback.
fn request() -> Parts {
    let mut request = Request::get("/")
        .header(HOST, "127.0.0.1:18121")
        .body(())
        .unwrap();
    request
        .extensions_mut()
        .insert(SocketAddr::from(([127, 0, 0, 1], 40_000)));
    request.into_parts().0
}

fn allocations_of(f: impl FnOnce()) -> u64 {
    let region = Region::new(GLOBAL);
    f();
    let change = region.change();
    u64::try_from(change.allocations + change.reallocations).unwrap()
}

#[test]
fn the_proxys_own_work_on_a_request_allocates_within_its_bounds() {
    // The forwarding headers, on a head as hyper reads it: a map sized to its headers,
    // their values slices of the shared read buffer (a copy of one shares it).
    let trust = ClientIp::new();
    let peer = Some("127.0.0.1".parse().unwrap());
    let mut read = BytesMut::from(&b"127.0.0.1:18121wrk"[..]);
    let head = read.split_to(18).freeze();
    let value = |from, to| HeaderValue::from_maybe_shared(head.slice(from..to)).unwrap();
    let mut worst = 0;
    for _ in 0..10 {
        let mut headers = HeaderMap::with_capacity(2);
        headers.insert(HOST, value(0, 15));
        headers.insert(USER_AGENT, value(15, 18));
        let made = allocations_of(|| probe::forwarding_headers(&mut headers, peer, &trust));
        assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
        assert_eq!(headers["x-real-ip"], "127.0.0.1");
        worst = worst.max(made);
    }
    eprintln!("forwarding headers: {worst} allocations a request");
    assert!(
        worst <= FORWARDING_MAX,
        "the forwarding headers allocate {worst} times a request (at most {FORWARDING_MAX})"
    );

    // The decision, on the memory store, once the keys' records exist.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _entered = runtime.enter();
    let mut settings = EngineSettings::default();
    settings.rules = RuleSource::Inline {
        name: "bench.yaml",
        yaml: RULES,
    };
    let engine = runtime.block_on(Engine::open(settings)).unwrap();
    let classes: Arc<[Class]> = Arc::from(vec![Class::known_crawlers()]);
    let limits = ProxyLimits::new(engine, classes, ClientIp::new(), OnLimit::Reject);
    let parts = request();
    let mut cx = Context::from_waker(Waker::noop());
    let mut decide = || {
        let mut evaluation = limits.evaluate(&parts);
        match evaluation.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(evaluation)) => {
                assert!(evaluation.allowed);
                assert_eq!(evaluation.applied.len(), 2, "both limits checked");
            }
            Poll::Ready(Err(e)) => panic!("not decided: {e:?}"),
            Poll::Pending => panic!("a memory-store decision waits on nothing"),
        }
    };
    for _ in 0..3 {
        decide();
    }
    let mut worst = 0;
    for _ in 0..10 {
        worst = worst.max(allocations_of(&mut decide));
    }
    eprintln!("decision: {worst} allocations a request");
    assert!(
        worst <= DECISION_MAX,
        "a decision allocates {worst} times a request (at most {DECISION_MAX})"
    );
}
