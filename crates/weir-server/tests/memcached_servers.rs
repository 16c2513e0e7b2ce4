//! The server over two real `memcached` processes (`memcache://a,b`), one killed and
//! restarted: a dead server sends only its own keys to their rule's failure policy, keys
//! on the live server keep deciding exactly on the store, and the dead server's keys
//! return to the store once it answers again. Decisions on the test's manual clock; the
//! only waits are bounded readiness waits on the server's own metrics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::node_outage::{rules, Nodes, Placed};
use common::{bounded, settings, Scratch, TestServer};
use weir_server::StoreSpec;
use weir_testkit::servers::Memcached;

/// Values of `key`, each checked once (admitted), split by the server that took them: the
/// one whose item count grew is the one the ring placed it on. A value after which both or
/// neither grew is left out: another item (the instances' presence key, written by the
/// server's own task at its own time) landed in the same moment, and the count says nothing.
async fn place(nodes: &Nodes<'_>, a: &Memcached, b: &Memcached, key: &str) -> Placed {
    let (mut on_a, mut on_b) = (Vec::new(), Vec::new());
    for i in 0..40 {
        let value = format!("v{i}");
        let before = (a.items(), b.items());
        assert_eq!(nodes.status(key, &value).await, 200);
        match (a.items() > before.0, b.items() > before.1) {
            (true, false) => on_a.push(value),
            (false, true) => on_b.push(value),
            _ => {}
        }
    }
    assert!(on_a.len() >= 2 && on_b.len() >= 2, "{on_a:?} {on_b:?}");
    Placed {
        dead: on_a,
        live: on_b,
    }
}

// Issue 29: with `memcache://a,b` and one server killed, every fail_closed key got 429 and
// every local_fallback key was decided locally, those on the live server included: the
// circuit covered the whole store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_memcached_sends_only_its_own_keys_to_their_failure_policy() {
    let mut a = Memcached::start();
    let b = Memcached::start();
    bounded(async {
        let scratch = Scratch::new("memcached-servers");
        scratch.write("two.yaml", &rules("two"));
        let (mut settings, clock) = settings(Some(&scratch.0));
        let list = format!("memcache://127.0.0.1:{},127.0.0.1:{}", a.port(), b.port());
        settings.engine.store = StoreSpec::parse(&list).unwrap();
        settings.engine.failover.instances = 2;
        let server = TestServer::start(settings).await;
        let nodes = Nodes {
            server: &server,
            domain: "two",
            store: "memcached",
        };
        let closed = place(&nodes, &a, &b, "closed").await;
        let local = place(&nodes, &a, &b, "local").await;

        a.kill();
        nodes
            .expect_only_the_dead_nodes_keys_fail(&closed, &local)
            .await;

        a.restart();
        nodes.until_every_node_decides().await;
        // Past the fail_closed denials' retry_after (the probe interval, which the
        // over-limit cache honours), still within the minute's window.
        clock.advance(Duration::from_secs(1));
        nodes.expect_every_key_on_the_store(&closed).await;
        server.stop().await.unwrap();
    })
    .await;
}
