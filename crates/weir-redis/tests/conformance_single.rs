//! The conformance suite against one real `redis-server`, under the manual clock (the
//! process clock passed in ARGV): every outcome equals the model's, field for field.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_redis::{RedisStore, TimeSource};
use weir_testkit::conformance::{self, Suite};
use weir_testkit::servers::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_single_node_passes_the_conformance_suite() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        // The manual clock stands still while real time passes: keep keys well past it.
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    conformance::run(
        &store,
        Suite {
            prefix: "single",
            ..Suite::default()
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batching_store_passes_the_conformance_suite() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5))
        .batch(64, Duration::ZERO)
        .build()
        .unwrap();
    conformance::run(
        &store,
        Suite {
            cases: 100,
            seed: 0xba7c,
            prefix: "batched",
        },
    )
    .await;
}
