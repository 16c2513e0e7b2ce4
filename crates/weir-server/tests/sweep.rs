//! The memory store is swept in the background: keys whose usage has expired (on the
//! server's clock) leave the store without any request touching them again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_keys_are_swept_from_the_memory_store() {
    bounded(async {
        let dir = Scratch::new("sweep");
        let rules = dir.write("rules.yaml", &simple_rules("d", "k", 5, "second"));
        let (mut settings, clock) = settings(Some(&rules));
        settings.engine.sweep_interval = Duration::from_millis(10);
        let server = TestServer::start(settings).await;
        for i in 0..20 {
            let body = check_body("d", &[("k", &format!("client-{i}"))]);
            assert_eq!(server.post("/v1/check", &body).await.status, 200);
        }
        let limiter = server.app.engine().limiter();
        let memory = limiter.store().memory().unwrap();
        assert_eq!(memory.len(), 20);

        // The windows end on the server's clock; the sweeper, running every 10 ms of real
        // time, removes the records without a request.
        clock.advance(Duration::from_secs(2));
        while !memory.is_empty() {
            tokio::task::yield_now().await;
        }
        server.stop().await.unwrap();
    })
    .await;
}
