//! Faults of a real Redis: killed (`kill -9`) mid-test, and hung (`DEBUG SLEEP`). Every
//! call must come back with a clear `StoreError` within its bound (never a panic, never a
//! hang), with no password in any message, and decisions must work again once Redis is
//! back, with the same store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{CheckError, Key, Op, Outcome, Rule, Store, StoreError};
use weir_redis::{RedisStore, TimeSource};
use weir_testkit::servers::RedisServer;
use weir_testkit::T0_NS;

const PASSWORD: &str = "s3cret-pw";

fn store(url: String, timeout: Duration) -> RedisStore {
    builder(url, timeout).build().unwrap()
}

fn builder(url: String, timeout: Duration) -> weir_redis::RedisStoreBuilder {
    RedisStore::builder(url)
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(timeout)
}

async fn check(store: &RedisStore, now: u64) -> Result<Outcome, CheckError> {
    let rule = Rule::per_second(1_000).unwrap();
    let key = Key::new("fault").unwrap();
    // The bound: the store's own timeout plus scheduling slack. A hang fails here.
    tokio::time::timeout(
        Duration::from_secs(2),
        store.apply(
            weir_core::ScopedKey::plain(&key),
            &rule,
            Op::Check { cost: 1 },
            now,
        ),
    )
    .await
    .expect("a store call outlived its timeout")
}

fn assert_clear(result: Result<Outcome, CheckError>) -> StoreError {
    match result {
        Err(CheckError::Store(e @ (StoreError::Unavailable(_) | StoreError::Timeout { .. }))) => {
            assert!(!e.to_string().contains(PASSWORD), "password leaked: {e}");
            e
        }
        other => panic!("expected a store error, got {other:?}"),
    }
}

/// Requires a password (set after start: the test kit's readiness probe is an unauthenticated
/// PING).
fn protect(redis: &RedisServer) {
    let reply = redis.raw(&format!("CONFIG SET requirepass {PASSWORD}"));
    assert_eq!(reply.as_deref(), Some("+OK\r\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_redis_fails_fast_and_is_used_again_after_a_restart() {
    killed_and_restarted(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_batching_a_killed_redis_fails_fast_and_is_used_again_after_a_restart() {
    killed_and_restarted(true).await;
}

async fn killed_and_restarted(batch: bool) {
    let mut redis = RedisServer::start();
    protect(&redis);
    let url = format!("redis://:{PASSWORD}@127.0.0.1:{}", redis.port());
    let mut builder = builder(url, Duration::from_millis(200));
    if batch {
        builder = builder.batch(16, Duration::ZERO);
    }
    let store = builder.build().unwrap();
    assert!(check(&store, T0_NS).await.is_ok());
    store.ping().await.unwrap();

    redis.kill();
    for i in 0..5 {
        let e = assert_clear(check(&store, T0_NS + i).await);
        assert!(matches!(e, StoreError::Unavailable(_)), "{e}");
    }
    let e = store.ping().await.unwrap_err();
    assert!(!e.to_string().contains(PASSWORD), "{e}");

    redis.restart();
    protect(&redis);
    // The broken connection was dropped: the first call after the restart reconnects.
    assert!(check(&store, T0_NS + 10).await.is_ok());
    store.ping().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_a_clear_error_without_the_password() {
    let redis = RedisServer::start();
    protect(&redis);
    let store = store(
        format!("redis://:not-{PASSWORD}@127.0.0.1:{}", redis.port()),
        Duration::from_millis(500),
    );
    let e = assert_clear(check(&store, T0_NS).await);
    assert!(!e.to_string().contains("not-"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_redis_times_out_within_the_bound_and_recovers() {
    let redis = RedisServer::start_with(&["--enable-debug-command", "yes"]);
    let timeout = Duration::from_millis(100);
    let store = store(redis.url(), timeout);
    assert!(check(&store, T0_NS).await.is_ok());

    // Hang Redis for 1.5 s from another connection.
    let client = redis::Client::open(redis.url()).unwrap();
    let no_timeout = redis::AsyncConnectionConfig::new().set_response_timeout(None);
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&no_timeout)
        .await
        .unwrap();
    let sleeper = tokio::spawn(async move {
        let _: redis::RedisResult<redis::Value> = redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg("1.5")
            .query_async(&mut conn)
            .await;
    });
    // Give the command a moment to reach Redis (real time, by nature of the fault).
    tokio::time::sleep(Duration::from_millis(100)).await;
    for i in 0..4 {
        let e = assert_clear(check(&store, T0_NS + i).await);
        assert_eq!(e, StoreError::Timeout { timeout_ms: 100 });
    }
    assert_eq!(
        store.ping().await.unwrap_err(),
        StoreError::Timeout { timeout_ms: 100 }
    );

    sleeper.await.unwrap();
    let after = check(&store, T0_NS + 10).await;
    assert!(after.is_ok(), "{after:?}");
    store.ping().await.unwrap();
}
