//! The conformance suite against a Redis Cluster of three primaries and three replicas,
//! under the manual clock. Keys spread over every primary; the several-limits part uses
//! keys with a common hash tag (`{cluster}`), as a Cluster requires, and a check_all whose
//! keys fall in different slots is refused with a clear error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{CheckError, Key, Rule, Store};
use weir_redis::{RedisStore, TimeSource};
use weir_testkit::conformance::{self, Suite};
use weir_testkit::servers::RedisCluster;
use weir_testkit::T0_NS;

fn store(cluster: &RedisCluster) -> RedisStore {
    builder(cluster).build().unwrap()
}

fn builder(cluster: &RedisCluster) -> weir_redis::RedisStoreBuilder {
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .take(3)
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    RedisStore::builder(format!("redis+cluster://{}", seeds.join(",")))
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_passes_the_conformance_suite() {
    let cluster = RedisCluster::start();
    let store = store(&cluster);
    let spread = Suite {
        cases: 200,
        prefix: "cluster",
        ..Suite::default()
    };
    conformance::model_agreement(&store, spread).await;
    conformance::invariants(&store, spread).await;
    conformance::leases(&store, spread).await;
    let tagged = Suite {
        prefix: "{cluster}",
        ..spread
    };
    conformance::check_all_atomic(&store, tagged).await;

    // The keys landed on every primary.
    for node in cluster.nodes().iter().take(3) {
        let keys = node.raw("DBSIZE").unwrap_or_default();
        let replica = node.raw("ROLE").is_some_and(|r| r.contains("slave"));
        assert!(
            replica || keys != ":0\r\n",
            "a primary holds no key: {keys:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_in_different_slots_are_refused_with_a_clear_error() {
    let cluster = RedisCluster::start();
    let store = store(&cluster);
    let rule = Rule::per_second(10).unwrap();
    let apart = [
        (Key::new("api:1s:user-7").unwrap(), rule),
        (Key::new("api:1h:user-7").unwrap(), rule),
    ];
    let err = store
        .check_all(weir_core::ScopedLimits::plain(&apart), 1, T0_NS)
        .await
        .unwrap_err();
    assert!(
        matches!(err, CheckError::Invalid { param: "keys", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("common hash tag"), "{err}");
    let together = [
        (Key::new("api:1s:{user-7}").unwrap(), rule),
        (Key::new("api:1h:{user-7}").unwrap(), rule),
    ];
    assert!(
        store
            .check_all(weir_core::ScopedLimits::plain(&together), 1, T0_NS)
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_on_a_cluster_are_split_by_slot_and_decide_exactly() {
    let cluster = RedisCluster::start();
    let store = builder(&cluster).batch(64, Duration::ZERO).build().unwrap();
    let rule = Rule::fixed_window(3, Duration::from_secs(60)).unwrap();
    // 40 keys over every primary, 5 checks each, all at once: 3 pass per key.
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (store, key) = (
                store.clone(),
                Key::new(format!("spread:{}", i % 40)).unwrap(),
            );
            tokio::spawn(async move {
                let outcome = store
                    .apply(
                        weir_core::ScopedKey::plain(&key),
                        &rule,
                        weir_core::Op::Check { cost: 1 },
                        T0_NS,
                    )
                    .await
                    .unwrap();
                (
                    i % 40,
                    matches!(outcome, weir_core::Outcome::Decision(d) if d.allowed),
                )
            })
        })
        .collect();
    let mut admitted = [0u32; 40];
    for t in tasks {
        let (k, allowed) = t.await.unwrap();
        admitted[k] += u32::from(allowed);
    }
    assert_eq!(admitted, [3; 40]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_go_on_after_a_primary_fails_over() {
    let mut cluster = RedisCluster::start();
    let store = builder(&cluster)
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let rule = Rule::fixed_window(1_000, Duration::from_secs(3_600)).unwrap();
    let keys: Vec<Key> = (0..30)
        .map(|i| Key::new(format!("failover:{i}")).unwrap())
        .collect();
    for key in &keys {
        store
            .apply(
                weir_core::ScopedKey::plain(key),
                &rule,
                weir_core::Op::Check { cost: 1 },
                T0_NS,
            )
            .await
            .unwrap();
    }

    // A replica takes over only if it has synced (otherwise its data is too old to be
    // promoted), which takes a few seconds after the cluster is created.
    for _ in 0..500 {
        let synced = cluster.nodes().iter().all(|n| {
            let info = n.raw("INFO replication").unwrap_or_default();
            info.contains("role:master") || info.contains("master_link_status:up")
        });
        if synced {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cluster.nodes_mut()[0].kill();
    // Until a replica takes over (cluster-node-timeout 2 s), calls on the dead primary's
    // slots fail clearly within the timeout; then every key is decided again. Each round
    // tries the failing keys at once; 40 rounds take at most about 30 s.
    let mut pending: Vec<Key> = keys;
    let mut errors = std::collections::BTreeSet::new();
    for round in 0..40u64 {
        let attempts: Vec<_> = pending
            .into_iter()
            .map(|key| {
                let store = store.clone();
                tokio::spawn(async move {
                    let outcome = tokio::time::timeout(
                        Duration::from_secs(2),
                        store.apply(
                            weir_core::ScopedKey::plain(&key),
                            &rule,
                            weir_core::Op::Check { cost: 1 },
                            T0_NS + round,
                        ),
                    )
                    .await
                    .expect("a store call outlived its timeout");
                    (key, outcome)
                })
            })
            .collect();
        pending = Vec::new();
        for attempt in attempts {
            match attempt.await.unwrap() {
                (_, Ok(_)) => {}
                (key, Err(CheckError::Store(e))) => {
                    errors.insert(e.to_string());
                    pending.push(key);
                }
                (_, Err(e)) => panic!("{e}"),
            }
        }
        if pending.is_empty() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    panic!(
        "{} keys still failing after the failover: {errors:?}",
        pending.len()
    );
}
