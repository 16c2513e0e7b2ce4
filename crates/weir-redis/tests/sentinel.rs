//! Behind Sentinel: the store finds the master through a sentinel, passes the conformance
//! suite there (a shorter run), and after the master is killed and the sentinel promotes
//! its replica, decisions go on against the new master with the same store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Key, Op, Outcome, Rule, Store};
use weir_redis::{RedisStore, TimeSource};
use weir_testkit::conformance::{self, Suite};
use weir_testkit::sentinel::RedisSentinel;
use weir_testkit::servers::RedisServer;
use weir_testkit::T0_NS;

const MASTER: &str = "weir-master";

fn store(sentinel: &RedisSentinel) -> RedisStore {
    RedisStore::builder(format!(
        "redis+sentinel://127.0.0.1:{}/{MASTER}",
        sentinel.port()
    ))
    .time_source(TimeSource::Process)
    .ttl_grace(Duration::from_secs(600))
    .timeout(Duration::from_millis(500))
    .build()
    .unwrap()
}

/// Polls `ready` every 20 ms for up to 10 s (replication takes real time).
async fn wait_for(what: &str, ready: impl Fn() -> bool) {
    for _ in 0..500 {
        if ready() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_sentinel_the_store_conforms_and_follows_a_failover() {
    // No diskless-sync delay (5 s by default): the replica syncs at once.
    let mut master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    let replica =
        RedisServer::start_with(&["--replicaof", "127.0.0.1", &master.port().to_string()]);
    wait_for("the replica to sync", || {
        replica
            .raw("INFO replication")
            .is_some_and(|i| i.contains("master_link_status:up"))
    })
    .await;
    let sentinel = RedisSentinel::start(MASTER, master.port());
    sentinel.wait_for_replicas(MASTER, 1);
    let store = store(&sentinel);

    conformance::run(
        &store,
        Suite {
            cases: 40,
            prefix: "sentinel",
            ..Suite::default()
        },
    )
    .await;

    let rule = Rule::fixed_window(1_000, Duration::from_secs(3_600)).unwrap();
    let key = Key::new("failover").unwrap();
    let check = |now| {
        store.apply(
            weir_core::ScopedKey::plain(&key),
            &rule,
            Op::Check { cost: 1 },
            now,
        )
    };
    assert!(matches!(check(T0_NS).await, Ok(Outcome::Decision(d)) if d.allowed));

    // Replication is asynchronous: let the record reach the replica before the failover.
    wait_for("the record to reach the replica", || {
        replica.raw("EXISTS weir:{failover}").as_deref() == Some(":1\r\n")
    })
    .await;
    master.kill();
    let promoted = sentinel.wait_for_failover(MASTER, master.port(), Duration::from_secs(20));
    assert_eq!(promoted, replica.port());

    // The old connection is broken; within a few calls the store asks the sentinel again
    // and reaches the promoted replica. Every call in between fails clearly and quickly.
    let mut recovered = None;
    for attempt in 0..50u64 {
        match tokio::time::timeout(Duration::from_secs(2), check(T0_NS + 1 + attempt))
            .await
            .expect("a store call outlived its timeout")
        {
            Ok(Outcome::Decision(d)) => {
                recovered = Some(d);
                break;
            }
            Ok(other) => panic!("{other:?}"),
            Err(e) => {
                assert!(matches!(e, weir_core::CheckError::Store(_)), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let d = recovered.expect("decisions did not resume after the failover");
    assert!(d.allowed);
    // The record survived the failover (it was replicated first; in general Redis may lose
    // the last writes in a failover, as replication is asynchronous).
    assert_eq!(d.remaining, 998, "{d:?}");
}
