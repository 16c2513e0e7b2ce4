//! The conformance suite on the embedded memory store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use weir_core::MemoryStore;
use weir_testkit::conformance;

#[tokio::test]
async fn memory_store_passes_the_conformance_suite() {
    conformance::run_all(&MemoryStore::default()).await;
}

#[tokio::test]
async fn a_tiny_sharded_memory_store_still_conforms() {
    // Few shards and keys crowded together: sharding and sweeping must not change answers.
    let store = MemoryStore::builder().capacity(100_000).shards(2).build();
    let suite = conformance::Suite {
        cases: 100,
        seed: 7,
        prefix: "tiny",
    };
    conformance::run(&store, suite).await;
}
