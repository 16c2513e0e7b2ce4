//! The conformance suite of `weir-testkit` against a real memcached, under the manual clock:
//! every outcome of every operation on every algorithm must equal the reference model's.

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
        .build()
        .unwrap();
    let run = conformance::run(
        &store,
        Suite {
            prefix: "conformance",
            ..Suite::default()
        },
    );
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the suite finishes within two minutes");
}
