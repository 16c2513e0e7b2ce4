//! What an all-or-nothing check on the memory store allocates (the proxy makes one per
//! request), once the keys' records exist: its answer (`Decisions::each`) and the working
//! copy of a record whose state lives on the heap (a sliding window's buckets), nothing
//! else (no vector of hashes, shards, guards or copies: eight allocations before, three now).
//! Counted by `stats_alloc`'s instrumented system allocator (the only test in this binary,
//! so no other test allocates meanwhile).

use std::alloc::System;
use std::time::Duration;

use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};
use weir_core::{Key, MemoryStore, Rule};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// The proxy's two limits (a per-client GCRA on a long text key, a global sliding window):
/// each check of both allocates the answer's vector and the sliding window's copy (its box
/// and its buckets), the GCRA's copy nothing.
#[test]
fn a_check_of_a_requests_limits_allocates_only_its_answer() {
    let store = MemoryStore::default();
    let per_ip = Rule::gcra(1_000_000, Duration::from_secs(1), 1_000_000).unwrap();
    let global = Rule::sliding_window(
        100_000_000,
        Duration::from_secs(1),
        Duration::from_millis(100),
    )
    .unwrap();
    let limits = [
        (
            Key::new("proxy/class=reader/remote_address=127.0.0.1").unwrap(),
            per_ip,
        ),
        (Key::new("proxy/global=all").unwrap(), global),
    ];
    let sec = 1_000_000_000u64;
    // The records are made by the first check (a new key allocates its entry).
    assert!(store.check_all_scoped_now(&limits, 1, sec).unwrap().allowed);
    for i in 1..100u64 {
        let region = Region::new(GLOBAL);
        let decisions = store.check_all_scoped_now(&limits, 1, sec + i).unwrap();
        let made = region.change().allocations + region.change().reallocations;
        assert!(decisions.allowed);
        assert_eq!(decisions.each.len(), 2);
        drop(decisions);
        assert_eq!(
            made, 3,
            "check {i}: {made} allocations; the answer's and the sliding copy's expected"
        );
    }
}
