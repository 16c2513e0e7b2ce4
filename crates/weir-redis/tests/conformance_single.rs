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
        // A wait, so that every call goes through the batch script (with none, a lone
        // call goes directly, as one call of the single script).
        .batch(64, Duration::from_micros(1))
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seeds_that_once_disagreed_on_expired_records_agree() {
    // Expired token buckets (initial < capacity) touched by operations that add no usage:
    // these seeds once found the memory store and the model disagreeing.
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for (seed, prefix) in [(10, "s10"), (20, "s20"), (22, "s22"), (30, "s30")] {
        let suite = Suite {
            cases: 150,
            seed,
            prefix,
        };
        conformance::model_agreement(&store, suite).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_all_with_a_repeated_key_agrees_with_the_model() {
    use weir_core::{Key, Lockout, Rule, Store};
    use weir_testkit::{Model, T0_NS};

    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    let locked = Rule::sliding_log(3, ms(100))
        .unwrap()
        .with_lockout(Lockout::new(ms(50)).unwrap());
    let (a, b) = (Key::new("rep:a").unwrap(), Key::new("rep:b").unwrap());
    // The same key (one record) under two rules, and a second key; some costs deny only
    // one of them, and a record is written back when any of its own limits denied.
    let limits = [
        (a.clone(), Rule::fixed_window(4, ms(100)).unwrap()),
        (b.clone(), locked),
        (a.clone(), Rule::fixed_window(2, ms(100)).unwrap()),
    ];
    let mut model = Model::new();
    let mut now = T0_NS;
    for i in 0..60u64 {
        let cost = [1, 2, 0, 3][usize::try_from(i % 4).unwrap()];
        let got = store
            .check_all(weir_core::ScopedLimits::plain(&limits), cost, now)
            .await;
        let want = model.check_all(&limits, cost, now);
        assert_eq!(got, want, "step {i} at {now}");
        now += [0, 7_000_000, 30_000_000][usize::try_from(i % 3).unwrap()];
    }
}
