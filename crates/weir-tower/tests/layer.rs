//! The layer end to end: under axum on real sockets (127.0.0.1:0) for the budget shared by
//! clones, the headers and the client-IP rules; through `oneshot` with a `ManualClock` for
//! queueing, degrading, the in-flight limit and store failures, so no test sleeps.

#![cfg(feature = "axum")] // reads the peer address the way axum records it
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::routing::get;
use axum::Router;
use common::wait_for_sleepers;
use http::{Request, Response, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;
use weir_core::{FailurePolicy, Limiter, ManualClock, MemoryStore, Rule};
use weir_testkit::faults::{Fault, FaultyStore};
use weir_tower::{
    parse_ip_net, ClientIp, Fallback, InFlightLimit, KeyBy, OnLimit, Policy, RateLimitLayer,
};

const START_NS: u64 = 1_700_000_000_000_000_000;

fn manual_limiter() -> (Limiter<MemoryStore, ManualClock>, ManualClock) {
    let clock = ManualClock::new(START_NS);
    (Limiter::new(MemoryStore::default(), clock.clone()), clock)
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// One request on a new connection (so axum uses a new clone of the service each time).
async fn get_once(addr: SocketAddr, headers: &[(&str, &str)]) -> Response<String> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut request = Request::builder().uri("/").header("host", "test");
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = sender
        .send_request(
            request
                .body(http_body_util::Empty::<bytes::Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Response::from_parts(parts, String::from_utf8(body.to_vec()).unwrap())
}

fn header<'a>(r: &'a Response<String>, name: &str) -> &'a str {
    r.headers().get(name).map_or("", |v| v.to_str().unwrap())
}

#[tokio::test]
async fn clones_under_axum_share_one_budget_and_answer_with_headers() {
    let (limiter, _clock) = manual_limiter();
    let per_ip = Policy::new(
        "per_ip",
        Rule::fixed_window(3, Duration::from_secs(60)).unwrap(),
    )
    .unwrap()
    .key(KeyBy::peer_ip());
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, vec![per_ip]).unwrap());
    let addr = serve(app).await;

    for remaining in ["2", "1", "0"] {
        let r = get_once(addr, &[]).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(header(&r, "ratelimit-policy"), r#""per_ip";q=3;w=60"#);
        assert!(header(&r, "ratelimit").starts_with(&format!(r#""per_ip";r={remaining};t="#)));
    }
    let denied = get_once(addr, &[]).await;
    assert_eq!(denied.status(), StatusCode::TOO_MANY_REQUESTS);
    let retry: u64 = header(&denied, "retry-after").parse().unwrap();
    assert!((1..=60).contains(&retry), "retry-after {retry}");
    assert_eq!(
        header(&denied, "ratelimit"),
        format!(r#""per_ip";r=0;t={retry}"#)
    );
    assert_eq!(header(&denied, "content-type"), "application/json");
    let body: serde_json::Value = serde_json::from_str(denied.body()).unwrap();
    assert_eq!(body["error"], "rate limit exceeded");
    assert_eq!(body["limit"], "per_ip");
    assert_eq!(
        body["retry_after_ms"].as_u64().unwrap().div_ceil(1000),
        retry
    );
}

#[tokio::test]
async fn a_spoofed_forwarded_for_from_an_untrusted_peer_does_not_change_the_key() {
    let (limiter, _clock) = manual_limiter();
    let rule = Rule::fixed_window(2, Duration::from_secs(60)).unwrap();
    // The load balancers are 10.0.0.0/8; the test client (127.0.0.1) is not one of them.
    let untrusting = ClientIp::new().trust("10.0.0.0/8".parse().unwrap());
    let app = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(
            limiter,
            vec![Policy::new("ip", rule)
                .unwrap()
                .key(KeyBy::client_ip(untrusting))],
        )
        .unwrap(),
    );
    let addr = serve(app).await;
    let mut codes = Vec::new();
    for spoof in ["1.1.1.1", "2.2.2.2", "3.3.3.3", "4.4.4.4"] {
        codes.push(
            get_once(addr, &[("x-forwarded-for", spoof)])
                .await
                .status()
                .as_u16(),
        );
    }
    assert_eq!(codes, [200, 200, 429, 429], "one key: the peer's");

    // When the peer is trusted, each forwarded client gets its own budget.
    let (limiter, _clock) = manual_limiter();
    let trusting = ClientIp::new().trust(parse_ip_net("127.0.0.1").unwrap());
    let app = Router::new().route("/", get(|| async { "ok" })).layer(
        RateLimitLayer::new(
            limiter,
            vec![Policy::new("ip", rule)
                .unwrap()
                .key(KeyBy::client_ip(trusting))],
        )
        .unwrap(),
    );
    let addr = serve(app).await;
    for client in ["1.1.1.1", "2.2.2.2", "3.3.3.3"] {
        for _ in 0..2 {
            let r = get_once(addr, &[("x-forwarded-for", client)]).await;
            assert_eq!(r.status(), StatusCode::OK, "{client}");
        }
    }
    // Only X-Forwarded-For is read (the default): a client's own `Forwarded` does not
    // pick its key; these count as the trusted peer itself.
    let codes: Vec<u16> = {
        let mut codes = Vec::new();
        for spoof in ["5.5.5.5", "6.6.6.6", "7.7.7.7"] {
            let forwarded = format!("for={spoof}");
            let r = get_once(addr, &[("forwarded", forwarded.as_str())]).await;
            codes.push(r.status().as_u16());
        }
        codes
    };
    assert_eq!(
        codes,
        [200, 200, 429],
        "Forwarded is not read: one key, the peer's"
    );
}

fn request(path: &str) -> Request<Body> {
    Request::builder().uri(path).body(Body::empty()).unwrap()
}

#[tokio::test]
async fn queued_requests_wait_until_allowed_within_max_wait_and_queue_bounds() {
    let (limiter, clock) = manual_limiter();
    // 1 per second; a request waits up to 2.5 s, at most 2 waiting per key.
    let policy = Policy::new("paced", Rule::gcra(1, Duration::from_secs(1), 1).unwrap())
        .unwrap()
        .on_limit(OnLimit::Queue {
            max_wait: Duration::from_millis(2_500),
            max_queued: 2,
        })
        .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, vec![policy.key(KeyBy::global())]).unwrap());

    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        200
    );
    let first = tokio::spawn(app.clone().oneshot(request("/")));
    wait_for_sleepers(&clock, 1).await;
    let second = tokio::spawn(app.clone().oneshot(request("/")));
    wait_for_sleepers(&clock, 2).await;
    // Two wait already: the third is refused at once.
    let third = app.clone().oneshot(request("/")).await.unwrap();
    assert_eq!(third.status(), StatusCode::TOO_MANY_REQUESTS);

    clock.advance(Duration::from_secs(1));
    // One of the two gets the slot at t=1 s; the other sleeps again until t=2 s.
    wait_for_sleepers(&clock, 1).await;
    clock.advance(Duration::from_secs(1));
    let a = first.await.unwrap().unwrap();
    let b = second.await.unwrap().unwrap();
    assert_eq!((a.status(), b.status()), (StatusCode::OK, StatusCode::OK));
}

#[tokio::test]
async fn a_queued_request_gives_up_at_max_wait() {
    let (limiter, clock) = manual_limiter();
    let policy = Policy::new(
        "slow",
        Rule::fixed_window(1, Duration::from_secs(10)).unwrap(),
    )
    .unwrap()
    .on_limit(OnLimit::Queue {
        max_wait: Duration::from_secs(2),
        max_queued: 5,
    })
    .unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, vec![policy.key(KeyBy::global())]).unwrap());
    clock.set_ns(START_NS - START_NS % 10_000_000_000); // the start of a window
    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        200
    );
    // The window reopens in 10 s, past the 2 s max wait: refused at once, no waiting.
    let r = app.clone().oneshot(request("/")).await.unwrap();
    assert_eq!(r.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(r.headers()["retry-after"], "10");
    assert_eq!(clock.sleepers(), 0);
}

#[tokio::test]
async fn degraded_requests_go_to_the_fallback() {
    let (limiter, _clock) = manual_limiter();
    let policy = Policy::new(
        "readers",
        Rule::fixed_window(2, Duration::from_secs(60)).unwrap(),
    )
    .unwrap()
    .on_limit(OnLimit::Degrade)
    .unwrap();
    let full = Router::new().route("/", get(|| async { "full" }));
    let cheap = Router::new().route("/", get(|| async { "cheap" }));
    let service = tower::ServiceBuilder::new()
        .layer(RateLimitLayer::new(limiter, vec![policy.key(KeyBy::global())]).unwrap())
        .service(Fallback::new(full, cheap));
    let mut bodies = Vec::new();
    for _ in 0..4 {
        let r = service.clone().oneshot(request("/")).await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let body = r.into_body().collect().await.unwrap().to_bytes();
        bodies.push(String::from_utf8(body.to_vec()).unwrap());
    }
    assert_eq!(bodies, ["full", "full", "cheap", "cheap"]);
}

#[tokio::test]
async fn the_in_flight_limit_bounds_the_inner_service() {
    let clock = ManualClock::new(START_NS);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let backend = {
        let (inside, peak, gate) = (inside.clone(), peak.clone(), gate.clone());
        tower::service_fn(move |_req: Request<Body>| {
            let (inside, peak, gate) = (inside.clone(), peak.clone(), gate.clone());
            async move {
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                peak.fetch_max(now, Ordering::SeqCst);
                gate.acquire().await.unwrap().forget();
                inside.fetch_sub(1, Ordering::SeqCst);
                Ok::<_, Infallible>(Response::new(Body::from("done")))
            }
        })
    };
    let layer = RateLimitLayer::new(limiter, vec![])
        .unwrap()
        .max_in_flight(InFlightLimit::fixed(2, 1, Duration::from_secs(3)));
    let service = tower::ServiceBuilder::new()
        .layer(layer.clone())
        .service(backend);
    let a = tokio::spawn(service.clone().oneshot(request("/")));
    let b = tokio::spawn(service.clone().oneshot(request("/")));
    while inside.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    assert_eq!(layer.in_flight(), 2);
    let c = tokio::spawn(service.clone().oneshot(request("/")));
    wait_for_sleepers(&clock, 1).await; // c waits for a slot (its max-wait timer)
    let d = service.clone().oneshot(request("/")).await.unwrap();
    assert_eq!(
        d.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "the wait queue is full"
    );
    gate.add_permits(1); // one finishes: c goes in
    assert_eq!(a.await.unwrap().unwrap().status(), 200);
    gate.add_permits(2);
    assert_eq!(b.await.unwrap().unwrap().status(), 200);
    assert_eq!(c.await.unwrap().unwrap().status(), 200);
    assert_eq!(peak.load(Ordering::SeqCst), 2);

    // A waiter that never gets a slot gives up at max_wait.
    let e = tokio::spawn(service.clone().oneshot(request("/")));
    let f = tokio::spawn(service.clone().oneshot(request("/")));
    while inside.load(Ordering::SeqCst) < 2 {
        tokio::task::yield_now().await;
    }
    let g = tokio::spawn(service.clone().oneshot(request("/")));
    wait_for_sleepers(&clock, 1).await;
    clock.advance(Duration::from_secs(3));
    assert_eq!(
        g.await.unwrap().unwrap().status(),
        StatusCode::SERVICE_UNAVAILABLE
    );
    gate.add_permits(2);
    assert_eq!(e.await.unwrap().unwrap().status(), 200);
    assert_eq!(f.await.unwrap().unwrap().status(), 200);
}

#[tokio::test]
async fn store_failures_follow_the_rules_failure_policy() {
    let store = FaultyStore::new();
    let limiter = Limiter::new(store.clone(), ManualClock::new(START_NS));
    let open = Rule::per_second(1)
        .unwrap()
        .on_failure(FailurePolicy::FailOpen);
    let closed = Rule::per_second(1)
        .unwrap()
        .on_failure(FailurePolicy::FailClosed);
    let app = Router::new()
        .route("/open", get(|| async { "ok" }))
        .route("/closed", get(|| async { "ok" }))
        .layer(
            RateLimitLayer::new(
                limiter,
                vec![
                    Policy::new("open", open)
                        .unwrap()
                        .path("/open")
                        .key(KeyBy::global()),
                    Policy::new("closed", closed)
                        .unwrap()
                        .path("/closed")
                        .key(KeyBy::global()),
                ],
            )
            .unwrap(),
        );
    store.set(Fault::Down);
    assert_eq!(
        app.clone()
            .oneshot(request("/open"))
            .await
            .unwrap()
            .status(),
        200
    );
    let r = app.clone().oneshot(request("/closed")).await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let body = r.into_body().collect().await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("rate limiter unavailable"));
}

#[tokio::test]
async fn several_policies_are_all_or_nothing_and_only_matching_ones_apply() {
    let (limiter, _clock) = manual_limiter();
    let minute = Rule::fixed_window(3, Duration::from_secs(60)).unwrap();
    let burst = Rule::fixed_window(1, Duration::from_secs(60)).unwrap();
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .route("/burst", get(|| async { "ok" }))
        .layer(
            RateLimitLayer::new(
                limiter.clone(),
                vec![
                    Policy::new("all", minute).unwrap().key(KeyBy::global()),
                    Policy::new("burst", burst)
                        .unwrap()
                        .path("/burst")
                        .key(KeyBy::global()),
                ],
            )
            .unwrap(),
        );
    assert_eq!(
        app.clone()
            .oneshot(request("/burst"))
            .await
            .unwrap()
            .status(),
        200
    );
    let r = app.clone().oneshot(request("/burst")).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.headers()["ratelimit-policy"],
        r#""all";q=3;w=60, "burst";q=1;w=60"#
    );
    // The denied /burst consumed nothing from "all": two more pass on "/".
    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        200
    );
    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        200
    );
    assert_eq!(
        app.clone().oneshot(request("/")).await.unwrap().status(),
        429
    );
}

#[test]
fn two_policies_with_one_name_are_refused() {
    let rule = Rule::per_second(1).unwrap();
    let e = RateLimitLayer::new(
        Limiter::default(),
        vec![
            Policy::new("api", rule).unwrap().key(KeyBy::global()),
            Policy::new("api", rule)
                .unwrap()
                .path("/x")
                .key(KeyBy::global()),
        ],
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "two policies are named api: a policy's name is its keys' namespace, so names must differ"
    );
}

#[tokio::test]
async fn no_spelling_of_a_path_walks_around_a_limit_on_it() {
    let (limiter, _clock) = manual_limiter();
    let login = Policy::new(
        "login",
        Rule::fixed_window(2, Duration::from_secs(60)).unwrap(),
    )
    .unwrap()
    .path("/login")
    .key(KeyBy::global());
    let per_path = Policy::new(
        "per_path",
        Rule::fixed_window(3, Duration::from_secs(60)).unwrap(),
    )
    .unwrap()
    .path_prefix("/files")
    .key(KeyBy::path());
    // A backend that, like many, resolves dot segments and escapes itself: it answers
    // every path.
    let app = tower::ServiceBuilder::new()
        .layer(RateLimitLayer::new(limiter, vec![login, per_path]).unwrap())
        .service_fn(|_req: Request<Body>| async {
            Ok::<_, Infallible>(Response::new(Body::empty()))
        });
    let status = |path: &'static str| {
        let app = app.clone();
        async move { app.oneshot(request(path)).await.unwrap().status() }
    };
    assert_eq!(status("/login").await, StatusCode::OK);
    assert_eq!(status("//login").await, StatusCode::OK);
    for spelling in [
        "/login",
        "/./login",
        "/login/.",
        "/x/../login",
        "/%6cogin",
        "//login",
    ] {
        assert_eq!(
            status(spelling).await,
            StatusCode::TOO_MANY_REQUESTS,
            "{spelling}"
        );
    }
    // Keyed by path: padding a path is still the same key.
    for _ in 0..3 {
        assert_eq!(status("/files/a").await, StatusCode::OK);
    }
    for spelling in [
        "/files/a",
        "/files/./a",
        "/files//a",
        "/files/b/../a",
        "/%66iles/a",
    ] {
        assert_eq!(
            status(spelling).await,
            StatusCode::TOO_MANY_REQUESTS,
            "{spelling}"
        );
    }
    assert_eq!(status("/files/b").await, StatusCode::OK);
}

/// A client-IP key on a server that does not record the peer (plain `axum::serve`
/// without connect info) used to skip the policy: every request went through unlimited.
/// It is refused (503, fail closed) and says how to fix the server; a policy keyed by a
/// header the request lacks still simply does not apply.
#[tokio::test]
async fn a_client_ip_key_without_a_peer_address_fails_closed_not_open() {
    let (limiter, _clock) = manual_limiter();
    let per_ip = Policy::new(
        "per_ip",
        Rule::fixed_window(100, Duration::from_secs(60)).unwrap(),
    )
    .unwrap()
    .key(KeyBy::peer_ip());
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter.clone(), vec![per_ip]).unwrap());
    let r = app.clone().oneshot(request("/")).await.unwrap();
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);

    // With the peer recorded, the same policy limits as usual.
    let mut with_peer = request("/");
    with_peer
        .extensions_mut()
        .insert(axum::extract::ConnectInfo(SocketAddr::from((
            [10, 0, 0, 7],
            5000,
        ))));
    assert_eq!(
        app.oneshot(with_peer).await.unwrap().status(),
        StatusCode::OK
    );

    // A header key the request lacks: the policy does not apply (its documented meaning).
    let per_key = Policy::new(
        "per_key",
        Rule::fixed_window(1, Duration::from_secs(60)).unwrap(),
    )
    .unwrap()
    .key(KeyBy::header("x-api-key").unwrap());
    let app = Router::new()
        .route("/", get(|| async { "ok" }))
        .layer(RateLimitLayer::new(limiter, vec![per_key]).unwrap());
    for _ in 0..3 {
        assert_eq!(
            app.clone().oneshot(request("/")).await.unwrap().status(),
            StatusCode::OK
        );
    }
}
