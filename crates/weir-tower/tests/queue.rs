//! The layer's queue waits as the limiter does (`weir_core::Wait`): a queued request reaches
//! the inner service exactly when the limiter would admit it (not a nanosecond before), and
//! a request the leaky-bucket queue paces goes exactly after its delay. Driven through
//! `oneshot` on a `ManualClock`; the inner service records the clock when it is called.

#![cfg(feature = "axum")] // axum's body type
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use common::wait_for_sleepers;
use http::{Request, Response, StatusCode};
use tower::ServiceExt;
use weir_core::{Clock, Key, Limiter, ManualClock, MemoryStore, Rule};
use weir_tower::{KeyBy, OnLimit, Policy, RateLimitLayer};

use common::START_NS;

type Inner = tower::util::BoxCloneService<Request<Body>, Response<Body>, Infallible>;

/// A service that answers 200 and records when (on `clock`) it was called.
fn recording(clock: &ManualClock) -> (Inner, Arc<Mutex<Vec<u64>>>) {
    let calls = Arc::new(Mutex::new(Vec::new()));
    let service = {
        let (clock, calls) = (clock.clone(), calls.clone());
        tower::service_fn(move |_req: Request<Body>| {
            calls.lock().unwrap().push(clock.now_ns());
            async { Ok::<_, Infallible>(Response::new(Body::empty())) }
        })
    };
    (Inner::new(service), calls)
}

fn request() -> Request<Body> {
    Request::builder().uri("/").body(Body::empty()).unwrap()
}

/// Lets every runnable task run (the test runtime has one thread).
async fn settle() {
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test]
async fn a_queued_request_is_released_exactly_when_the_limiter_would_admit_it() {
    let clock = ManualClock::new(START_NS);
    // 3 per second, no burst: turns a third of a second apart, not a round number of ns.
    let rule = Rule::gcra(3, Duration::from_secs(1), 1).unwrap();
    let layer = RateLimitLayer::new(
        Limiter::new(MemoryStore::default(), clock.clone()),
        vec![Policy::new("paced", rule)
            .unwrap()
            .on_limit(OnLimit::Queue {
                max_wait: Duration::from_secs(1),
                max_queued: 4,
            })
            .unwrap()
            .key(KeyBy::global())],
    )
    .unwrap();
    let (inner, calls) = recording(&clock);
    let service = tower::ServiceBuilder::new().layer(layer).service(inner);

    // The limiter's own answer for the same rule on the same clock: when the second
    // request in a row would be admitted.
    let twin = Limiter::new(MemoryStore::default(), clock.clone());
    let key = Key::new("twin").unwrap();
    assert!(twin.check_now(&key, &rule, 1).unwrap().allowed);
    let retry_after = twin.peek_now(&key, &rule).unwrap().retry_after;
    assert!(!retry_after.is_zero());
    let admit_ns = START_NS + u64::try_from(retry_after.as_nanos()).unwrap();

    let first = service.clone().oneshot(request()).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let queued = tokio::spawn(service.clone().oneshot(request()));
    wait_for_sleepers(&clock, 1).await;

    // One nanosecond before the limiter would admit it: still waiting.
    clock.set_ns(admit_ns - 1);
    assert!(!twin.peek_now(&key, &rule).unwrap().allowed);
    settle().await;
    assert!(!queued.is_finished(), "released before the limiter admits");
    assert_eq!(calls.lock().unwrap().len(), 1);

    // At that nanosecond: released, and the inner service is called then.
    clock.set_ns(admit_ns);
    assert!(twin.peek_now(&key, &rule).unwrap().allowed);
    let released = queued.await.unwrap().unwrap();
    assert_eq!(released.status(), StatusCode::OK);
    assert_eq!(*calls.lock().unwrap(), [START_NS, admit_ns]);
}

#[tokio::test]
async fn a_paced_request_goes_exactly_after_its_delay() {
    let clock = ManualClock::new(START_NS);
    // The leaky-bucket queue: output at 2 a second, each request told its delay.
    let rule = Rule::leaky_queue(2, Duration::from_secs(1), 4, Duration::from_secs(5)).unwrap();
    let layer = RateLimitLayer::new(
        Limiter::new(MemoryStore::default(), clock.clone()),
        vec![Policy::new("shaped", rule).unwrap().key(KeyBy::global())],
    )
    .unwrap();
    let (inner, calls) = recording(&clock);
    let service = tower::ServiceBuilder::new().layer(layer).service(inner);

    let twin = Limiter::new(MemoryStore::default(), clock.clone());
    let key = Key::new("twin").unwrap();
    assert!(twin.check_now(&key, &rule, 1).unwrap().delay.is_zero());
    let delay = twin.check_now(&key, &rule, 1).unwrap().delay;
    assert!(!delay.is_zero());
    let go_ns = START_NS + u64::try_from(delay.as_nanos()).unwrap();

    assert_eq!(
        service.clone().oneshot(request()).await.unwrap().status(),
        StatusCode::OK
    );
    let paced = tokio::spawn(service.clone().oneshot(request()));
    wait_for_sleepers(&clock, 1).await;
    clock.set_ns(go_ns - 1);
    settle().await;
    assert!(!paced.is_finished(), "sent before its delay");
    clock.set_ns(go_ns);
    assert_eq!(paced.await.unwrap().unwrap().status(), StatusCode::OK);
    assert_eq!(*calls.lock().unwrap(), [START_NS, go_ns]);
}
