//! A real Redis Cluster's health per primary, as a failure guard sees it through
//! `Store::parts`, `part_of` and `ping_part`: one part per primary, every key in the part
//! of the primary serving its slot; a killed primary fails its own part's PING and calls,
//! and only those; restarted, or replaced by its promoted replica, it answers for the same
//! part again. The only waits are bounded readiness waits on the store's own answers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::collections::BTreeSet;
use std::time::Duration;

use weir_core::{Key, Op, Rule, ScopedKey, Store};
use weir_redis::{RedisStore, TimeSource};
use weir_testkit::servers::RedisCluster;
use weir_testkit::T0_NS;

fn store(cluster: &RedisCluster) -> RedisStore {
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    RedisStore::builder(format!("redis+cluster://{}", seeds.join(",")))
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap()
}

/// Lets the live primaries serve their slots while one is down (Redis's default refuses
/// every key until all slots are served again).
fn partial_coverage(cluster: &RedisCluster) {
    for node in cluster.nodes() {
        allow_partial(node);
    }
}

fn allow_partial(node: &weir_testkit::servers::RedisServer) {
    let reply = node.raw("CONFIG SET cluster-require-full-coverage no");
    assert_eq!(reply.as_deref(), Some("+OK\r\n"));
}

fn keys() -> Vec<Key> {
    (0..60)
        .map(|i| Key::new(format!("k{i}")).unwrap())
        .collect()
}

/// The part of the primary holding `key`'s record (a plain key: its record is named by its bytes).
fn part_of(store: &RedisStore, key: &Key) -> usize {
    store.part_of(ScopedKey::plain(key), &Rule::per_second(1).unwrap())
}

async fn check(store: &RedisStore, key: &Key) -> bool {
    let rule = Rule::per_second(1_000_000).unwrap();
    let call = store.apply(ScopedKey::plain(key), &rule, Op::Check { cost: 1 }, T0_NS);
    let r = tokio::time::timeout(Duration::from_secs(10), call).await;
    matches!(r, Ok(Ok(_)))
}

/// Waits (bounded, 30 s) until `ready` holds, asking every 50 ms.
async fn until<F, Fut>(what: &str, mut ready: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..600 {
        if ready().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} within 30 s");
}

/// Connects, then waits until the slot map is read: the keys fall in three parts.
async fn mapped(store: &RedisStore) -> BTreeSet<usize> {
    assert_eq!(store.parts(), 64);
    assert!(check(store, &Key::new("first").unwrap()).await);
    let parts = || {
        keys()
            .iter()
            .map(|k| part_of(store, k))
            .collect::<BTreeSet<_>>()
    };
    until("three parts", || async { parts().len() == 3 }).await;
    parts()
}

/// Whether `node` replicates the primary whose id is `primary`.
fn replica_of(node: &weir_testkit::servers::RedisServer, primary: &str) -> bool {
    let port = node.port();
    node.raw("CLUSTER NODES").is_some_and(|nodes| {
        nodes
            .lines()
            .any(|l| l.contains(&format!(":{port}@")) && l.contains(primary))
    })
}

/// The parts whose PING fails now.
async fn failing(store: &RedisStore, parts: &BTreeSet<usize>) -> Vec<usize> {
    let mut down = Vec::new();
    for part in parts {
        if store.ping_part(*part).await.is_err() {
            down.push(*part);
        }
    }
    down
}

// Issue 29: a Cluster store's circuit covered the whole store, so one dead primary sent
// every key to its rule's failure policy. The store now names the primary of each key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_fails_only_its_own_part_and_answers_again_after_a_restart() {
    let mut cluster = RedisCluster::start_with(3, 0);
    partial_coverage(&cluster);
    let store = store(&cluster);
    let parts = mapped(&store).await;
    assert_eq!(failing(&store, &parts).await, Vec::<usize>::new());

    cluster.nodes_mut()[0].kill();
    let down = failing(&store, &parts).await;
    assert_eq!(down.len(), 1, "exactly the dead primary's part: {down:?}");
    let dead = down[0];
    for key in keys() {
        let on_dead = part_of(&store, &key) == dead;
        assert_eq!(
            check(&store, &key).await,
            !on_dead,
            "{key}: part {dead} is down"
        );
    }

    cluster.nodes_mut()[0].restart();
    allow_partial(&cluster.nodes()[0]);
    until("the restarted primary answers for its part", || async {
        store.ping_part(dead).await.is_ok()
    })
    .await;
    let back = keys()
        .into_iter()
        .find(|k| part_of(&store, k) == dead)
        .unwrap();
    until("its keys decided on it again", || check(&store, &back)).await;
    for key in keys() {
        assert!(check(&store, &key).await, "{key}");
    }
}

// A failover: the dead primary's replica is promoted and takes over the same part, which
// then answers again, without the old primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promoted_replica_takes_over_the_dead_primarys_part() {
    let mut cluster = RedisCluster::start_with(3, 1);
    partial_coverage(&cluster);
    let store = store(&cluster);
    let parts = mapped(&store).await;
    let placed: Vec<(Key, usize)> = keys()
        .into_iter()
        .map(|k| {
            let p = part_of(&store, &k);
            (k, p)
        })
        .collect();

    let id = cluster.nodes()[0].raw("CLUSTER MYID").unwrap();
    let id = id.lines().nth(1).unwrap().to_owned();
    cluster.nodes_mut()[0].kill();
    let down = failing(&store, &parts).await;
    assert_eq!(down.len(), 1, "{down:?}");
    let dead = down[0];
    // Its replica takes over now rather than after the Cluster's own vote (seconds, and
    // not always within a test's bound).
    let replica = cluster
        .nodes()
        .iter()
        .find(|n| n.raw("ROLE").is_some_and(|r| r.contains("slave")) && replica_of(n, &id))
        .expect("the dead primary's replica");
    assert_eq!(
        replica.raw("CLUSTER FAILOVER TAKEOVER").as_deref(),
        Some("+OK\r\n")
    );
    // The Cluster first: every live node must see the replica as a primary (gossip, which
    // a loaded host slows) before the store, which reads the slot map from them, can.
    let promoted = replica.port();
    let live: Vec<_> = cluster.nodes().iter().skip(1).collect();
    until("every live node sees the replica promoted", || async {
        live.iter().all(|node| {
            node.raw("CLUSTER NODES").is_some_and(|nodes| {
                nodes
                    .lines()
                    .any(|l| l.contains(&format!(":{promoted}@")) && l.contains("master"))
            })
        })
    })
    .await;
    let answered = async {
        for _ in 0..600 {
            if store.ping_part(dead).await.is_ok() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    };
    if !answered.await {
        // What each live node said, for whoever meets this.
        let views: Vec<_> = live.iter().map(|n| n.raw("CLUSTER NODES")).collect();
        panic!("the replica, promoted, answers for the part within 30 s; the nodes: {views:#?}");
    }
    for (key, part) in &placed {
        assert_eq!(part_of(&store, key), *part, "{key} stays in its part");
    }
    let moved = placed.iter().find(|(_, p)| *p == dead).unwrap().0.clone();
    until("its keys decided on the new primary", || {
        check(&store, &moved)
    })
    .await;
}
