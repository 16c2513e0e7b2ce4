//! The conformance suite of `weir-testkit` against a real memcached, under the manual clock:
//! every outcome of every operation on every algorithm must equal the reference model's.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_memcached::MemcachedStore;
use weir_testkit::conformance::{self, Suite};
use weir_testkit::servers::Memcached;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_against_memcached() {
    let server = Memcached::start();
    let store = MemcachedStore::builder(&server.url())
        // Generous: the machine is shared with builds; a timeout here is not what is tested.
        .timeout(Duration::from_secs(5))
        // The suite's clock is manual: a record it still holds may be seconds old in real
        // time, and memcached must not forget it (TESTING, "Flaky runs").
        .ttl_grace(Duration::from_secs(600))
        .build()
        .unwrap();
    let run = async {
        conformance::run_all(&store).await;
        // A second seed, on keys of its own: more scenarios for the counters' many parts.
        let suite = Suite {
            seed: 0x6d65_6d63,
            prefix: "conformance-2",
            ..Suite::default()
        };
        conformance::model_agreement(&store, suite).await;
    };
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the suite finishes within two minutes");
}
