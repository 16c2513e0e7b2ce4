//! Issue 10's key flood, through the HTTP API: one client sends one request per made-up key
//! against a small memory store. New legitimate keys keep being served; a rule whose flood
//! leaves only limited keys refuses its new keys per its failure policy (a clear 503, no
//! invented `Retry-After`), while another rule's new keys still pass and `/readyz` reports
//! the store degraded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, settings, Scratch, TestServer};
use weir_server::StoreSpec;

const RULES: &str = "
domain: d
descriptors:
  - key: user
    rate_limit: {unit: hour, requests_per_unit: 100}
  - key: strict
    rate_limit: {unit: hour, requests_per_unit: 1}
  - key: other
    rate_limit: {unit: hour, requests_per_unit: 10}
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_one_off_keys_does_not_lock_out_new_clients() {
    bounded(async {
        let dir = Scratch::new("capacity");
        let rules = dir.write("rules.yaml", RULES);
        let (mut settings, _clock) = settings(Some(&rules));
        settings.engine.store = StoreSpec::Memory { capacity: 64 };
        let server = TestServer::start(settings).await;

        // One request per made-up key under a roomy rule: unlimited records are evicted, so
        // a second client's new keys keep passing.
        for i in 0..400 {
            let flood = check_body("d", &[("user", &format!("flood-{i}"))]);
            assert_eq!(
                server.post("/v1/check", &flood).await.status,
                200,
                "flood {i}"
            );
            if i % 20 == 0 {
                let fresh = check_body("d", &[("user", &format!("client-{i}"))]);
                assert_eq!(
                    server.post("/v1/check", &fresh).await.status,
                    200,
                    "client {i}"
                );
            }
        }
        assert_eq!(server.get("/readyz").await.status, 200);

        // A flood under a limit-1 rule leaves only limited keys: past its share, that rule's
        // new keys are refused by its failure policy (fail closed: 503, saying why).
        let mut refused = None;
        for i in 0..200 {
            let a = server
                .post(
                    "/v1/check",
                    &check_body("d", &[("strict", &format!("s-{i}"))]),
                )
                .await;
            if a.status != 200 {
                refused = Some(a);
                break;
            }
        }
        let refused = refused.expect("the strict rule's share filled up");
        assert_eq!(refused.status, 503, "{}", refused.body);
        assert!(
            refused.body.contains("memory store is full"),
            "{}",
            refused.body
        );
        assert!(
            refused.header("retry-after").is_none(),
            "no invented Retry-After"
        );

        // Another rule's new keys still pass; /readyz says the store is degraded.
        for i in 0..10 {
            let a = server
                .post(
                    "/v1/check",
                    &check_body("d", &[("other", &format!("o-{i}"))]),
                )
                .await;
            assert_eq!(a.status, 200, "other rule key {i}: {}", a.body);
        }
        let ready = server.get("/readyz").await;
        assert_eq!(ready.status, 503);
        assert!(ready.body.contains("degraded"), "{}", ready.body);
        let metrics = server.get("/metrics").await;
        assert!(metrics.body.contains("full"), "the refusal is counted");
        server.stop().await.unwrap();
    })
    .await;
}
