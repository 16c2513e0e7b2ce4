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

#[tokio::test]
async fn seeds_that_once_disagreed_on_expired_records_now_agree() {
    // Expired token buckets with initial < capacity, touched by operations that add no
    // usage: seeds 10, 20, 22 and 30 once found the memory store and the model disagreeing.
    for seed in [10, 20, 22, 30] {
        let store = MemoryStore::default();
        let suite = conformance::Suite {
            cases: 300,
            seed,
            prefix: "expired",
        };
        conformance::model_agreement(&store, suite).await;
    }
}
