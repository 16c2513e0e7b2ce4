//! `CL.THROTTLE` and `THROTTLE` answer the same on every store `weir serve --store` names:
//! redis-cell's table and throttlecrab's cases on a real `redis-server` and a real
//! `memcached` (throwaway processes from `weir-testkit`), through `weir serve`'s own
//! store stack (failover, over-limit cache, leases) and the `weir serve --resp` wiring,
//! deciding by the test's manual clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::app::{app, serve_resp};
use common::{ints, CELL_TABLE, START_NS};
use weir_core::ManualClock;
use weir_testkit::servers::{Memcached, RedisServer};

async fn scenarios(url: &str) {
    let clock = ManualClock::new(START_NS);
    let app = app(&clock, Some(url)).await;
    let (addr, stop, task) = serve_resp(&app).await;
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let mut at = 0;
    for (i, (offset_ms, quantity, expected)) in CELL_TABLE.into_iter().enumerate() {
        clock.advance(Duration::from_millis(offset_ms - at));
        at = offset_ms;
        let got = ints(&mut con, &["CL.THROTTLE", "foo", "4", "1", "1", quantity]).await;
        assert_eq!(got, expected, "{url}: case {i}");
    }
    let got = ints(&mut con, &["THROTTLE", "test_key", "10", "100", "60"]).await;
    assert_eq!(got, [1, 10, 9, 5, 0], "{url}");
    let got = ints(&mut con, &["THROTTLE", "test_key2", "10", "100", "60", "5"]).await;
    assert_eq!(got, [1, 10, 5, 7, 0], "{url}");
    let _ = stop.send(());
    tokio::time::timeout(common::PATIENCE, task)
        .await
        .unwrap()
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_answers_on_redis() {
    let redis = RedisServer::start();
    scenarios(&redis.url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_answers_on_memcached() {
    let memcached = Memcached::start();
    scenarios(&memcached.url()).await;
}
