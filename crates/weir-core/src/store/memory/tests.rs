//! The memory store's unit tests across its paths: memory bounds and eviction, forced
//! hash collisions, the lock-free table's chunks, all-or-nothing checks.

use super::*;
use crate::error::StoreError;
use crate::key::Key;
use std::sync::Arc;
use std::time::Duration;

const SEC: u64 = 1_000_000_000;

fn check(store: &MemoryStore, key: &Key, rule: &Rule, now_ns: u64) -> Result<bool, CheckError> {
    match store.apply_now(key, rule, Op::Check { cost: 1 }, now_ns)? {
        Outcome::Decision(d) => Ok(d.allowed),
        other => panic!("{other:?}"),
    }
}

/// A lock-free table is made by 64 KiB chunks as keys need them: one key makes one (its
/// first bucket's; the second bucket's only when the first is full), where the whole table used to be made (and resident) at
/// once; records in chunks made apart are all found, swept and counted.
#[test]
fn the_lock_free_table_is_made_by_chunks_as_keys_need_them() {
    let store = MemoryStore::default();
    let rule = Rule::per_second(10).unwrap();
    assert!(check(&store, &Key::from(1u64), &rule, SEC).unwrap());
    let stats = store.stats();
    assert_eq!(
        stats.lock_free_records, 524_288,
        "sized for the rule's share"
    );
    let index = (655_360usize / 4).div_ceil(1024) * 24; // chunks × 24 B
    assert!(
        stats.lock_free_bytes <= index + 65_536,
        "one key, one chunk: {} bytes",
        stats.lock_free_bytes
    );
    for k in 2..2000u64 {
        assert!(check(&store, &Key::from(k), &rule, SEC).unwrap());
    }
    assert_eq!(store.lock_free_len(SEC), 1999);
    assert!(store.stats().lock_free_bytes > stats.lock_free_bytes);
    for k in 1..2000u64 {
        let Outcome::Decision(d) = store
            .apply_now(&Key::from(k), &rule, Op::Check { cost: 0 }, SEC)
            .unwrap()
        else {
            panic!("a peek decides");
        };
        assert_eq!(d.remaining, 9, "key {k} found with its one check counted");
    }
    assert_eq!(
        store.sweep(SEC * 100),
        1999,
        "every record swept once expired"
    );
}

/// Issue 11: two keys whose hashes collide used to share one record.
#[test]
fn keys_whose_hashes_collide_never_share_a_record() {
    let mut store = MemoryStore::builder().capacity(1000).build();
    Arc::get_mut(&mut store.inner).unwrap().collide = true;
    // Burst 1: after its first check a key is limited, so never evicted; a merged
    // record would deny some key's first check.
    let rule = Rule::gcra(1, Duration::from_secs(3600), 1).unwrap();
    // Eight-byte keys (the lock-free path: all in one bucket pair, then overflowing to
    // the general path) and text keys (the general path), all of one hash.
    let keys: Vec<Key> = (0..20u64)
        .map(Key::from)
        .chain((0..20).map(|i| Key::new(format!("user-{i}")).unwrap()))
        .collect();
    for round in 0..3 {
        for key in &keys {
            let allowed = check(&store, key, &rule, SEC).unwrap();
            assert_eq!(allowed, round == 0, "{key:?} round {round}");
        }
    }
    // Scoped records of one key under two rules are apart too.
    let other = Rule::gcra(1, Duration::from_secs(3600), 2).unwrap();
    let key = &keys[0];
    let scoped = |rule: &Rule| match store.apply_scoped_now(key, rule, Op::Check { cost: 1 }, SEC) {
        Ok(Outcome::Decision(d)) => d.allowed,
        other => panic!("{other:?}"),
    };
    assert!(scoped(&rule) && !scoped(&rule));
    assert!(scoped(&other) && scoped(&other) && !scoped(&other));
}

#[test]
fn never_evicts_a_limited_key_and_fails_closed_for_new_ones() {
    let store = MemoryStore::builder()
        .capacity(4)
        .shards(1)
        .rule_share(100)
        .build();
    let rule = Rule::fixed_window(1, Duration::from_secs(60)).unwrap();
    // Keys longer than 48 bytes: the general path (shorter ones would take a lock-free
    // table first: `strings_store_tests.rs`).
    let key = |i: u64| Key::new(format!("{}-{i}", "k".repeat(48))).unwrap();
    for i in 0..4u64 {
        assert!(check(&store, &key(i), &rule, SEC).unwrap());
    }
    assert_eq!(
        check(&store, &key(99), &rule, SEC),
        Err(CheckError::Store(StoreError::Full { capacity: 4 }))
    );
    // The limited keys are still limited.
    assert!(!check(&store, &key(0), &rule, SEC).unwrap());
    // Once their window is over they are swept and new keys fit again.
    assert!(check(&store, &key(99), &rule, 61 * SEC).unwrap());
    assert_eq!(store.len(), 1);
}

/// Issue 10: one request per made-up key used to pin each key for its window, until
/// every new key under every rule was refused.
#[test]
fn a_flood_of_one_off_keys_leaves_room_for_new_clients() {
    let store = MemoryStore::builder().capacity(1000).shards(4).build();
    let per_user = Rule::fixed_window(100, Duration::from_secs(3600)).unwrap();
    // A limited key: never evicted, however long the flood.
    let limited = Key::new("victim-limited").unwrap();
    for _ in 0..100 {
        assert!(check(&store, &limited, &per_user, SEC).unwrap());
    }
    assert!(!check(&store, &limited, &per_user, SEC).unwrap());
    for i in 0..20_000u64 {
        let flood = Key::new(format!("flood-{i}")).unwrap();
        assert!(
            check(&store, &flood, &per_user, SEC).unwrap(),
            "flood key {i}"
        );
        if i % 100 == 0 {
            // A second client's new keys keep passing throughout.
            let fresh = Key::new(format!("client-{i}")).unwrap();
            assert!(
                check(&store, &fresh, &per_user, SEC).unwrap(),
                "client key {i}"
            );
        }
    }
    assert!(
        !check(&store, &limited, &per_user, SEC).unwrap(),
        "the limited key was never evicted"
    );
    let stats = store.stats();
    assert!(stats.len <= 1000, "{stats:?}");
    assert!(stats.evictions > 18_000, "{stats:?}");
    assert_eq!(stats.refusals, 0);
}

/// The same flood on the lock-free path (GCRA, 8-byte keys): unlimited records are
/// evicted once the table is full, limited ones never, and new clients keep passing.
#[test]
fn a_flood_of_one_off_keys_on_the_lock_free_path_leaves_room_for_new_clients() {
    let store = MemoryStore::builder().capacity(1000).shards(4).build();
    let rule = Rule::gcra(2, Duration::from_secs(3600), 2).unwrap();
    let limited = Key::from(u64::MAX);
    assert!(check(&store, &limited, &rule, SEC).unwrap());
    assert!(check(&store, &limited, &rule, SEC).unwrap());
    assert!(!check(&store, &limited, &rule, SEC).unwrap());
    for i in 0..20_000u64 {
        assert!(
            check(&store, &Key::from(i), &rule, SEC).unwrap(),
            "flood key {i}"
        );
        if i % 100 == 0 {
            let fresh = Key::from(1 << 40 | i);
            assert!(check(&store, &fresh, &rule, SEC).unwrap(), "client key {i}");
        }
    }
    assert!(
        !check(&store, &limited, &rule, SEC).unwrap(),
        "the limited key was never evicted"
    );
    let stats = store.stats();
    // The lock-free table holds the rule's share (500) and the general path the
    // overflow, within its capacity.
    assert!(stats.len <= 1000 + 700, "{stats:?}");
    assert!(stats.evictions > 15_000, "{stats:?}");
    assert_eq!(stats.refusals, 0);
}

#[test]
fn one_rules_flood_of_limited_keys_leaves_the_other_rules_capacity() {
    let store = MemoryStore::builder().capacity(100).shards(1).build();
    // limit 1: every flood key is limited after its one request, so none may go.
    let strict = Rule::fixed_window(1, Duration::from_secs(3600)).unwrap();
    let other = Rule::fixed_window(10, Duration::from_secs(3600)).unwrap();
    let mut refused = 0;
    for i in 0..1000u64 {
        // Keys longer than 48 bytes: the general path, whose shares this is about.
        let key = Key::new(format!("{}-a-{i}", "k".repeat(48))).unwrap();
        match check(&store, &key, &strict, SEC) {
            Ok(allowed) => assert!(allowed),
            Err(CheckError::Store(StoreError::Full { capacity: 100 })) => refused += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(
        refused, 950,
        "the flooding rule holds its share (50 %), no more"
    );
    for i in 0..50u64 {
        let key = Key::new(format!("{}-b-{i}", "k".repeat(48))).unwrap();
        assert!(check(&store, &key, &other, SEC).unwrap(), "rule B key {i}");
    }
    assert_eq!(store.stats().refusals, 950);
}

#[test]
fn peeks_and_idle_keys_take_no_memory() {
    let store = MemoryStore::default();
    let rule = Rule::per_second(10).unwrap();
    let key = Key::new("k").unwrap();
    store
        .apply_now(&key, &rule, Op::Check { cost: 0 }, SEC)
        .unwrap();
    assert!(store.is_empty());
    check(&store, &key, &rule, SEC).unwrap();
    assert_eq!(store.len(), 1);
    assert_eq!(store.sweep(SEC + SEC / 10), 1);
    assert!(store.is_empty());
}

#[test]
fn check_all_is_all_or_nothing() {
    let store = MemoryStore::default();
    let per_second = Rule::fixed_window(10, Duration::from_secs(1)).unwrap();
    let per_hour = Rule::fixed_window(2, Duration::from_secs(3600)).unwrap();
    let limits = [
        (Key::new("s:u").unwrap(), per_second),
        (Key::new("h:u").unwrap(), per_hour),
    ];
    assert!(store.check_all_now(&limits, 2, SEC).unwrap().allowed);
    let denied = store.check_all_now(&limits, 1, SEC).unwrap();
    assert!(!denied.allowed);
    assert!(denied.each[0].allowed && !denied.each[1].allowed);
    let usage = store
        .apply_now(&limits[0].0, &per_second, Op::Inspect, SEC)
        .unwrap();
    let Outcome::Usage(u) = usage else { panic!() };
    assert_eq!(
        u.used, 2,
        "the per-second limit consumed nothing on the denial"
    );
}
