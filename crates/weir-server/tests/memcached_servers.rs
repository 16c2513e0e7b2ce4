//! The server over two real `memcached` processes (`memcache://a,b`), one killed and
//! restarted: a dead server sends only its own keys to their rule's failure policy, keys
//! on the live server keep deciding exactly on the store, and the dead server's keys
//! return to the store once it answers again. Decisions on the test's manual clock; the
//! only waits are bounded readiness waits on the server's own metrics.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, check_body, settings, Scratch, TestServer};
use weir_server::StoreSpec;
use weir_testkit::servers::Memcached;

const RULES: &str = "domain: two
descriptors:
  - key: closed
    rule: {algorithm: fixed_window, limit: 3, window: 1m, on_failure: fail_closed}
  - key: local
    rule: {algorithm: fixed_window, limit: 4, window: 1m, on_failure: local_fallback}
";

async fn status(server: &TestServer, key: &str, value: &str) -> u16 {
    server
        .post("/v1/check", &check_body("two", &[(key, value)]))
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

/// Values of `key`, each checked once (admitted), split by the server that took them: the
/// one whose item count grew is the one the ring placed it on. A value after which both or
/// neither grew is left out: another item (the instances' presence key, written by the
/// server's own task at its own time) landed in the same moment, and the count says nothing.
async fn place(
    server: &TestServer,
    a: &Memcached,
    b: &Memcached,
    key: &str,
) -> (Vec<String>, Vec<String>) {
    let (mut on_a, mut on_b) = (Vec::new(), Vec::new());
    for i in 0..40 {
        let value = format!("v{i}");
        let before = (a.items(), b.items());
        assert_eq!(status(server, key, &value).await, 200);
        match (a.items() > before.0, b.items() > before.1) {
            (true, false) => on_a.push(value),
            (false, true) => on_b.push(value),
            _ => {}
        }
    }
    assert!(on_a.len() >= 2 && on_b.len() >= 2, "{on_a:?} {on_b:?}");
    (on_a, on_b)
}

/// Waits (bounded) until the server's metrics say no part of the store is in fallback.
async fn until_every_server_decides(server: &TestServer) {
    for _ in 0..500 {
        let metrics = server.get("/metrics").await.body;
        if metrics.contains(r#"weir_store_fallback{store="memcached"} 0"#) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the restarted memcached never took its keys back");
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
        scratch.write("two.yaml", RULES);
        let (mut settings, clock) = settings(Some(&scratch.0));
        let list = format!("memcache://127.0.0.1:{},127.0.0.1:{}", a.port(), b.port());
        settings.engine.store = StoreSpec::parse(&list).unwrap();
        settings.engine.failover.instances = 2;
        let server = TestServer::start(settings).await;
        let (closed_a, closed_b) = place(&server, &a, &b, "closed").await;
        let (local_a, local_b) = place(&server, &a, &b, "local").await;

        a.kill();
        // The dead server's keys: enough failed calls to open its circuit, each answered by
        // the rule's policy (fail_closed: 429).
        for value in &closed_a {
            assert_eq!(status(&server, "closed", value).await, 429, "{value}");
        }
        assert_eq!(statuses(&server, "closed", &closed_a[0], 6).await, [429; 6]);
        // The live server's keys are decided exactly on the store: two more of 3, then 429.
        assert_eq!(
            statuses(&server, "closed", &closed_b[0], 3).await,
            [200, 200, 429],
            "a key on the live server keeps its exact limit"
        );
        assert_eq!(
            statuses(&server, "local", &local_b[0], 4).await,
            [200, 200, 200, 429],
            "a local_fallback key on the live server keeps its exact limit, not the share"
        );
        // The dead server's local_fallback keys: this instance's share (4 / 2 instances).
        assert_eq!(
            statuses(&server, "local", &local_a[0], 3).await,
            [200, 200, 429]
        );
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains(r#"weir_store_fallback{store="memcached"} 1"#),
            "{metrics}"
        );

        a.restart();
        until_every_server_decides(&server).await;
        // Past the fail_closed denials' retry_after (the probe interval, which the
        // over-limit cache honours), still within the minute's window.
        clock.advance(Duration::from_secs(1));
        // Back on the restarted (empty) server: its keys are decided there again, exactly.
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
