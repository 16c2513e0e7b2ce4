//! Tests (compiled only for them): the conformance suite on every path and form of the
//! scripts that a store may run, against a real `redis-server` under the manual clock.
//! The tests in `tests/` run the production form (Redis 7 functions, fast path first);
//! these add the general path alone ([`Path::General`], so every fast-path algorithm is
//! also checked without it) and the `EVALSHA` scripts of a server without functions
//! (Redis 6.2), each unbatched and batched; the library's loading when a server lacks
//! it; and the switch to `EVALSHA` for a user whose ACL refuses functions.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Key, Op, Outcome, Rule, Store};
use weir_testkit::conformance::{self, Suite};
use weir_testkit::servers::RedisServer;

use crate::scripts::Path;
use crate::{RedisStore, TimeSource};

fn store(redis: &RedisServer, path: Path, eval: bool, batch: bool) -> RedisStore {
    let mut builder = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        // The manual clock stands still while real time passes: keep keys well past it.
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5));
    if batch {
        // A wait, so that every call goes through the batch entry point.
        builder = builder.batch(64, Duration::from_micros(1));
    }
    builder.path = path;
    builder.eval = eval;
    builder.build().unwrap()
}

async fn suite(path: Path, eval: bool, seed: u64) {
    let redis = RedisServer::start();
    for (batch, prefix) in [(false, "single"), (true, "batched")] {
        let store = store(&redis, path, eval, batch);
        let suite = Suite {
            cases: 100,
            seed,
            prefix,
        };
        conformance::run(&store, suite).await;
    }
    let functions = redis.raw("FUNCTION LIST").unwrap_or_default();
    // An empty list is `*0`; Weir's library makes it longer.
    assert_eq!(functions.trim() == "*0", eval, "FUNCTION LIST: {functions}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_general_path_alone_passes_the_conformance_suite() {
    suite(Path::General, false, 0x6e6e).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evalsha_scripts_pass_the_conformance_suite() {
    suite(Path::Fast, true, 0xe7a1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_evalsha_scripts_of_the_general_path_pass_the_conformance_suite() {
    suite(Path::General, true, 0x9e7a).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_lost_the_library_gets_it_again() {
    let redis = RedisServer::start();
    let store = store(&redis, Path::Fast, false, false);
    let rule = Rule::gcra(2, Duration::from_secs(1), 2).unwrap();
    let key = Key::new("lost").unwrap();
    let check = || {
        store.apply(
            weir_core::ScopedKey::plain(&key),
            &rule,
            Op::Check { cost: 1 },
            1_700_000_000_000_000_000,
        )
    };
    assert!(matches!(check().await, Ok(Outcome::Decision(d)) if d.allowed));
    // As after a restart that kept the data but not the functions.
    assert_eq!(redis.raw("FUNCTION FLUSH").as_deref(), Some("+OK\r\n"));
    assert_eq!(redis.raw("FUNCTION LIST").as_deref(), Some("*0\r\n"));
    // The record was kept: the second unit of the burst, then the library is back.
    assert!(matches!(check().await, Ok(Outcome::Decision(d)) if d.allowed && d.remaining == 0));
    assert_ne!(redis.raw("FUNCTION LIST").as_deref(), Some("*0\r\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_who_may_not_use_functions_gets_the_evalsha_scripts() {
    let redis = RedisServer::start();
    for command in [
        "ACL SETUSER scripts on >pw ~* +@all -fcall -function",
        "ACL SETUSER loads on >pw ~* +@all -function",
    ] {
        assert_eq!(redis.raw(command).as_deref(), Some("+OK\r\n"));
    }
    for user in ["scripts", "loads"] {
        let url = redis
            .url()
            .replace("redis://", &format!("redis://{user}:pw@"));
        let store = RedisStore::builder(url)
            .time_source(TimeSource::Process)
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap();
        let rule = Rule::fixed_window(1, Duration::from_secs(1)).unwrap();
        let key = Key::new(format!("acl:{user}")).unwrap();
        let now = 1_700_000_000_000_000_000;
        let check = || {
            store.apply(
                weir_core::ScopedKey::plain(&key),
                &rule,
                Op::Check { cost: 1 },
                now,
            )
        };
        let first = check().await;
        assert!(
            matches!(first, Ok(Outcome::Decision(d)) if d.allowed),
            "{first:?}"
        );
        assert!(matches!(check().await, Ok(Outcome::Decision(d)) if !d.allowed));
        assert!(store
            .inner
            .exec
            .eval
            .load(std::sync::atomic::Ordering::Relaxed));
    }
    assert_eq!(redis.raw("FUNCTION LIST").as_deref(), Some("*0\r\n"));
}
