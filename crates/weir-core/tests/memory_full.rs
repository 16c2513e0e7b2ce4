//! Issue 26, item 4: the memory store must never answer [`StoreError::Full`] while it holds
//! a record it may evict (one a check would still allow, with no block or strikes). Two
//! clients sending the same new keys at capacity used to get `Full` with nothing limited:
//! every record had been checked twice (a CLOCK second chance), and an eviction gave up after
//! looking at 256 of them. These tests fill a store with unlimited records in the ways that
//! used to defeat the scan (each key used twice; many rules; records swept from the queue)
//! and ask for new keys, single-threaded (exact) and from several threads at once (bounded).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::sync::{Arc, Barrier};
use std::time::Duration;

use weir_core::{CheckError, Key, MemoryStore, Op, Outcome, Rule, StoreError};

const SEC: u64 = 1_000_000_000;

fn check(store: &MemoryStore, key: &Key, rule: &Rule, now_ns: u64) -> Result<bool, CheckError> {
    match store.apply_now(key, rule, Op::Check { cost: 1 }, now_ns)? {
        Outcome::Decision(d) => Ok(d.allowed),
        other => panic!("{other:?}"),
    }
}

/// Keys longer than 48 bytes: the general path, whose eviction this is about (8-byte keys
/// and other keys up to 48 bytes go to a lock-free table first).
fn key(prefix: &str, i: u64) -> Key {
    Key::new(format!("{prefix}-key-{i:06}-{}", "x".repeat(48))).unwrap()
}

/// Every record checked twice (so each has its second chance), more of them than one
/// eviction used to look at: a new key used to be refused although none was limited.
#[test]
fn a_store_of_twice_used_unlimited_keys_evicts_for_a_new_one() {
    let store = MemoryStore::builder()
        .capacity(2000)
        .shards(1)
        .rule_share(100)
        .build();
    let rule = Rule::fixed_window(100, Duration::from_secs(3600)).unwrap();
    for i in 0..2000 {
        assert!(check(&store, &key("k", i), &rule, SEC).unwrap());
        assert!(check(&store, &key("k", i), &rule, SEC).unwrap());
    }
    for i in 0..2000 {
        assert_eq!(
            check(&store, &key("new", i), &rule, SEC),
            Ok(true),
            "new key {i}: nothing is limited, so something may go"
        );
    }
    let stats = store.stats();
    assert_eq!(stats.refusals, 0, "{stats:?}");
    assert!(stats.len <= 2000, "{stats:?}");
}

/// A full shard held by more rules than one eviction used to try (the four largest), the
/// largest all limited and the only evictable records under a small rule.
#[test]
fn a_full_store_finds_the_evictable_records_of_any_rule() {
    let store = MemoryStore::builder()
        .capacity(100)
        .shards(1)
        .rule_share(100)
        .build();
    // Four rules of limit 1, their keys limited after one check: never evicted.
    for r in 0..4u64 {
        let strict = Rule::fixed_window(1, Duration::from_secs(3600 + r)).unwrap();
        for i in 0..24 {
            assert!(check(&store, &key(&format!("strict{r}"), i), &strict, SEC).unwrap());
        }
    }
    // A fifth, roomy rule holds the last four records, unlimited.
    let roomy = Rule::fixed_window(100, Duration::from_secs(3600)).unwrap();
    for i in 0..4 {
        assert!(check(&store, &key("roomy", i), &roomy, SEC).unwrap());
    }
    assert_eq!(store.len(), 100);
    for i in 0..50 {
        assert_eq!(
            check(&store, &key("new", i), &roomy, SEC),
            Ok(true),
            "new key {i}: the roomy rule's records may go"
        );
    }
    // Once only limited records are left, a new key of a strict rule is refused: that is
    // a true "full" (their records must never go).
    let strict = Rule::fixed_window(1, Duration::from_secs(3600)).unwrap();
    for i in 0..4 {
        assert!(check(&store, &key("roomy-new", i), &strict, SEC).unwrap());
    }
    assert_eq!(
        check(&store, &key("refused", 0), &strict, SEC),
        Err(CheckError::Store(StoreError::Full { capacity: 100 }))
    );
}

/// Several threads send the same new keys at once into a store at capacity, each key used
/// by every thread (so each record gets its second chance), under a rule none of them
/// reaches. Not one `Full` may come back. Bounded: a fixed number of keys, no waiting but
/// the start barrier.
#[test]
fn concurrent_identical_new_keys_at_capacity_never_see_a_false_full() {
    const THREADS: usize = 4;
    const KEYS: u64 = 20_000;
    let store = MemoryStore::builder().capacity(4096).shards(4).build();
    let rule = Rule::fixed_window(1_000, Duration::from_secs(3600)).unwrap();
    // Fill the rule's share first, so every new key below needs an eviction.
    for i in 0..4096 {
        assert_eq!(
            check(&store, &key("fill", i), &rule, SEC),
            Ok(true),
            "fill {i}"
        );
    }
    let start = Arc::new(Barrier::new(THREADS));
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (store, start) = (store.clone(), Arc::clone(&start));
            std::thread::spawn(move || {
                start.wait();
                let mut full = 0u64;
                for i in 0..KEYS {
                    // Every thread sends every key; odd threads walk the keys in pairs
                    // swapped, so the threads overlap without moving in lockstep.
                    let i = if t % 2 == 1 { i ^ 1 } else { i };
                    match check(&store, &key("same", i), &rule, SEC) {
                        Ok(true) => {}
                        Err(CheckError::Store(StoreError::Full { .. })) => full += 1,
                        other => panic!("key {i}: {other:?}"),
                    }
                }
                full
            })
        })
        .collect();
    let full: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let stats = store.stats();
    assert_eq!(
        full, 0,
        "{full} false 'full' answers with nothing limited ({stats:?})"
    );
    assert_eq!(stats.refusals, 0, "{stats:?}");
    assert!(stats.len <= 4096, "{stats:?}");
}
