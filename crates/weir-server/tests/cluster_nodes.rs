//! The server over a real 3-primary Redis Cluster, one primary killed and restarted: a
//! dead primary sends only the keys whose slots it serves to their rule's failure policy,
//! keys on the live primaries keep deciding exactly on the store, and the dead primary's
//! keys return to the store once it answers again. Decisions on the test's manual clock;
//! the only waits are bounded readiness waits on the server's own answers and metrics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::node_outage::{rules, Nodes, Placed};
use common::{bounded, settings, Scratch, TestServer};
use weir_core::ManualClock;
use weir_server::{StoreClock, StoreSpec};
use weir_testkit::servers::{RedisCluster, RedisServer};

fn keys_on(node: &RedisServer) -> u64 {
    let reply = node.raw("DBSIZE").unwrap_or_default();
    reply.trim().trim_start_matches(':').parse().unwrap()
}

/// Values of `key`, each checked once (admitted), split into those whose record the
/// primary `a` took (its key count grew) and the others.
async fn place(nodes: &Nodes<'_>, a: &RedisServer, key: &str) -> Placed {
    let (mut on_a, mut others) = (Vec::new(), Vec::new());
    for i in 0..40 {
        let value = format!("v{i}");
        let before = keys_on(a);
        assert_eq!(nodes.status(key, &value).await, 200);
        if keys_on(a) > before {
            on_a.push(value);
        } else {
            others.push(value);
        }
    }
    assert!(on_a.len() >= 3 && others.len() >= 2, "{on_a:?} {others:?}");
    Placed {
        dead: on_a,
        live: others,
    }
}

/// Lets the live primaries serve their slots while one is down (Redis's default refuses
/// every key until all slots are served again).
fn allow_partial(node: &RedisServer) {
    let reply = node.raw("CONFIG SET cluster-require-full-coverage no");
    assert_eq!(reply.as_deref(), Some("+OK\r\n"));
}

/// Waits (bounded) until a fail_closed key on the restarted primary is admitted, i.e.
/// decided on the store again; each denial moves the clock past its retry_after.
async fn until_decided_on_the_store(nodes: &Nodes<'_>, clock: &ManualClock, value: &str) {
    for _ in 0..40 {
        if nodes.status("closed", value).await == 200 {
            return;
        }
        clock.advance(Duration::from_millis(300));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the restarted primary's keys were never decided on it");
}

// Issue 29: a Redis Cluster store had one circuit for the whole store, so one dead primary
// sent every key to its rule's failure policy (fail_closed: 429 for all), those on the live
// primaries included.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_primary_sends_only_its_own_keys_to_their_failure_policy() {
    let mut cluster = RedisCluster::start_with(3, 0);
    for node in cluster.nodes() {
        allow_partial(node);
    }
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let url = format!("redis+cluster://{}", seeds.join(","));
    bounded(async {
        let scratch = Scratch::new("cluster-nodes");
        scratch.write("nodes.yaml", &rules("nodes"));
        let (mut settings, clock) = settings(Some(&scratch.0));
        settings.engine.store = StoreSpec::parse(&url).unwrap();
        settings.engine.store_clock = StoreClock::Process;
        settings.engine.failover.instances = 2;
        let server = TestServer::start(settings).await;
        let nodes = Nodes {
            server: &server,
            domain: "nodes",
            store: "redis",
        };
        let closed = place(&nodes, &cluster.nodes()[0], "closed").await;
        let local = place(&nodes, &cluster.nodes()[0], "local").await;

        cluster.nodes_mut()[0].kill();
        nodes
            .expect_only_the_dead_nodes_keys_fail(&closed, &local)
            .await;

        cluster.nodes_mut()[0].restart();
        allow_partial(&cluster.nodes()[0]);
        nodes.until_every_node_decides().await;
        until_decided_on_the_store(&nodes, &clock, closed.dead.last().unwrap()).await;
        nodes.expect_every_key_on_the_store(&closed).await;
        server.stop().await.unwrap();
    })
    .await;
}
