//! The server over a real 3-primary Redis Cluster, one primary killed and restarted: a
//! dead primary sends only the keys whose slots it serves to their rule's failure policy,
//! keys on the live primaries keep deciding exactly on the store, and the dead primary's
//! keys return to the store once it answers again. Decisions on the test's manual clock;
//! the only waits are bounded readiness waits on the server's own answers and metrics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, check_body, settings, Scratch, TestServer};
use weir_core::ManualClock;
use weir_server::{StoreClock, StoreSpec};
use weir_testkit::servers::{RedisCluster, RedisServer};

const RULES: &str = "domain: nodes
descriptors:
  - key: closed
    rule: {algorithm: fixed_window, limit: 3, window: 1m, on_failure: fail_closed}
  - key: local
    rule: {algorithm: fixed_window, limit: 4, window: 1m, on_failure: local_fallback}
";

async fn status(server: &TestServer, key: &str, value: &str) -> u16 {
    server
        .post("/v1/check", &check_body("nodes", &[(key, value)]))
        .await
        .status
}

/// `n` checks of (`key`, `value`): their statuses.
async fn statuses(server: &TestServer, key: &str, value: &str, n: usize) -> Vec<u16> {
    let mut all = Vec::new();
    for _ in 0..n {
        all.push(status(server, key, value).await);
    }
    all
}

fn keys_on(node: &RedisServer) -> u64 {
    let reply = node.raw("DBSIZE").unwrap_or_default();
    reply.trim().trim_start_matches(':').parse().unwrap()
}

/// Values of `key`, each checked once (admitted), split into those whose record the
/// primary `a` took (its key count grew) and the others.
async fn place(server: &TestServer, a: &RedisServer, key: &str) -> (Vec<String>, Vec<String>) {
    let (mut on_a, mut others) = (Vec::new(), Vec::new());
    for i in 0..40 {
        let value = format!("v{i}");
        let before = keys_on(a);
        assert_eq!(status(server, key, &value).await, 200);
        if keys_on(a) > before {
            on_a.push(value);
        } else {
            others.push(value);
        }
    }
    assert!(on_a.len() >= 3 && others.len() >= 2, "{on_a:?} {others:?}");
    (on_a, others)
}

/// Lets the live primaries serve their slots while one is down (Redis's default refuses
/// every key until all slots are served again).
fn allow_partial(node: &RedisServer) {
    let reply = node.raw("CONFIG SET cluster-require-full-coverage no");
    assert_eq!(reply.as_deref(), Some("+OK\r\n"));
}

/// Waits (bounded) until the server's metrics say no part of the store is in fallback.
async fn until_every_primary_decides(server: &TestServer) {
    for _ in 0..600 {
        let metrics = server.get("/metrics").await.body;
        if metrics.contains(r#"weir_store_fallback{store="redis"} 0"#) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the restarted primary never took its keys back");
}

/// Waits (bounded) until a fail_closed key on the restarted primary is admitted, i.e.
/// decided on the store again; each denial moves the clock past its retry_after.
async fn until_decided_on_the_store(server: &TestServer, clock: &ManualClock, value: &str) {
    for _ in 0..40 {
        if status(server, "closed", value).await == 200 {
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
        scratch.write("nodes.yaml", RULES);
        let (mut settings, clock) = settings(Some(&scratch.0));
        settings.engine.store = StoreSpec::parse(&url).unwrap();
        settings.engine.store_clock = StoreClock::Process;
        settings.engine.failover.instances = 2;
        let server = TestServer::start(settings).await;
        let (closed_a, closed_b) = place(&server, &cluster.nodes()[0], "closed").await;
        let (local_a, local_b) = place(&server, &cluster.nodes()[0], "local").await;

        cluster.nodes_mut()[0].kill();
        // The dead primary's keys: enough failed calls to open its circuit, each answered
        // by the rule's policy (fail_closed: 429).
        for value in &closed_a {
            assert_eq!(status(&server, "closed", value).await, 429, "{value}");
        }
        assert_eq!(statuses(&server, "closed", &closed_a[0], 6).await, [429; 6]);
        // The live primaries' keys are decided exactly on the store: two more of 3.
        assert_eq!(
            statuses(&server, "closed", &closed_b[0], 3).await,
            [200, 200, 429],
            "a key on a live primary keeps its exact limit"
        );
        assert_eq!(
            statuses(&server, "local", &local_b[0], 4).await,
            [200, 200, 200, 429],
            "a local_fallback key on a live primary keeps its exact limit, not the share"
        );
        // The dead primary's local_fallback keys: this instance's share (4 / 2 instances).
        assert_eq!(
            statuses(&server, "local", &local_a[0], 3).await,
            [200, 200, 429]
        );
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains(r#"weir_store_fallback{store="redis"} 1"#),
            "{metrics}"
        );

        cluster.nodes_mut()[0].restart();
        allow_partial(&cluster.nodes()[0]);
        until_every_primary_decides(&server).await;
        let probe = closed_a.last().unwrap();
        until_decided_on_the_store(&server, &clock, probe).await;
        // Back on the restarted (empty) primary: its keys are decided there again, exactly.
        assert_eq!(
            statuses(&server, "closed", &closed_a[1], 4).await,
            [200, 200, 200, 429]
        );
        assert_eq!(
            statuses(&server, "closed", &closed_b[1], 3).await,
            [200, 200, 429]
        );
        server.stop().await.unwrap();
    })
    .await;
}
