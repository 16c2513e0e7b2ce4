//! String keys on the lock-free path, through the store (`strings.rs`, `routing.rs`,
//! `insert.rs`): forced hash collisions, a hot key on several threads admitting exactly its
//! limit while other threads move records to the general path, eviction at capacity under
//! concurrent inserts, and scopes with a share of their own kept on the general path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use crate::error::{CheckError, StoreError};
use crate::key::Key;
use crate::rule::Rule;
use crate::step::{Op, Outcome};

use super::super::MemoryStore;

const SEC: u64 = 1_000_000_000;

fn allowed(store: &MemoryStore, key: &Key, rule: &Rule, now_ns: u64) -> bool {
    match store.apply_scoped_now(key, rule, Op::Check { cost: 1 }, now_ns) {
        Ok(Outcome::Decision(d)) => d.allowed,
        other => panic!("{other:?}"),
    }
}

/// The one-word rules string keys may take the lock-free path under.
fn one_word_rules(limit: u64) -> [Rule; 4] {
    let hour = Duration::from_secs(3600);
    [
        Rule::gcra(limit, hour, limit).unwrap(),
        Rule::token_bucket(limit, 1, hour).unwrap(),
        Rule::fixed_window(limit, hour).unwrap(),
        Rule::weighted_window(limit, hour).unwrap(),
    ]
}

/// Every key hashes alike: string keys of every one-word rule each keep their own
/// allowance, the first few in the lock-free table (two buckets of four slots), the rest
/// in the general table, all verified against their full key.
#[test]
fn string_keys_whose_hashes_collide_never_share_a_record() {
    for rule in one_word_rules(3) {
        let mut store = MemoryStore::default();
        Arc::get_mut(&mut store.inner).unwrap().collide = true;
        let keys: Vec<Key> = (0..40)
            .map(|i| Key::new(format!("2001:db8::{i:x}")).unwrap())
            .collect();
        for round in 0..5 {
            for key in &keys {
                let ok = allowed(&store, key, &rule, SEC);
                assert_eq!(ok, round < 3, "{key:?} round {round} under {rule:?}");
            }
        }
        let lock_free = store.lock_free_len(SEC);
        assert!((1..=8).contains(&lock_free), "{lock_free} held lock-free");
        assert_eq!(store.len(), 40);
    }
}

/// A hot string key checked from four threads at one instant admits exactly its limit,
/// under every one-word rule, while a fifth thread moves hot keys to the general path
/// (an inspect) one by one: no admission is lost or doubled by a move.
#[test]
fn a_hot_string_key_admits_exactly_its_limit_across_threads() {
    const LIMIT: u64 = 500;
    const KEYS: usize = 8;
    for rule in one_word_rules(LIMIT) {
        let store = MemoryStore::default();
        let keys: Arc<Vec<Key>> = Arc::new(
            (0..KEYS)
                .map(|i| Key::new(format!("global:{i}")).unwrap())
                .collect(),
        );
        let start = Arc::new(Barrier::new(5));
        let checkers: Vec<_> = (0..4)
            .map(|_| {
                let (store, keys, rule, start) = (store.clone(), keys.clone(), rule, start.clone());
                thread::spawn(move || {
                    start.wait();
                    let mut admitted = vec![0u64; KEYS];
                    for _ in 0..300 {
                        for (i, key) in keys.iter().enumerate() {
                            admitted[i] += u64::from(allowed(&store, key, &rule, SEC));
                        }
                    }
                    admitted
                })
            })
            .collect();
        let mover = {
            let (store, keys, rule, start) = (store.clone(), keys.clone(), rule, start.clone());
            thread::spawn(move || {
                start.wait();
                for key in keys.iter().skip(1).step_by(2) {
                    for _ in 0..50 {
                        store
                            .apply_scoped_now(key, &rule, Op::Check { cost: 0 }, SEC)
                            .unwrap();
                    }
                    store
                        .apply_scoped_now(key, &rule, Op::Inspect, SEC)
                        .unwrap();
                }
            })
        };
        let mut admitted = vec![0u64; KEYS];
        for checker in checkers {
            for (total, n) in admitted.iter_mut().zip(checker.join().unwrap()) {
                *total += n;
            }
        }
        mover.join().unwrap();
        assert_eq!(admitted, vec![LIMIT; KEYS], "under {rule:?}");
        assert_eq!(store.len(), KEYS, "each key held once");
    }
}

/// A small store flooded with one-off string keys from four threads at once: limited keys
/// are never evicted (they stay denied), new keys evict unlimited ones or are refused,
/// and the store holds no more than its tables and capacity allow.
#[test]
fn eviction_at_capacity_under_concurrent_inserts_keeps_limited_keys() {
    let store = MemoryStore::builder().capacity(256).build();
    let rule = Rule::fixed_window(2, Duration::from_secs(3600)).unwrap();
    let limited: Vec<Key> = (0..16)
        .map(|i| Key::new(format!("abuser-{i}")).unwrap())
        .collect();
    for key in &limited {
        assert!(allowed(&store, key, &rule, SEC));
        assert!(allowed(&store, key, &rule, SEC));
        assert!(!allowed(&store, key, &rule, SEC));
    }
    let start = Arc::new(Barrier::new(4));
    let flooders: Vec<_> = (0..4)
        .map(|t| {
            let (store, rule, start) = (store.clone(), rule, start.clone());
            thread::spawn(move || {
                start.wait();
                let mut refused = 0u64;
                for i in 0..3000 {
                    let key = Key::new(format!("one-off-{t}-{i}")).unwrap();
                    match store.apply_scoped_now(&key, &rule, Op::Check { cost: 1 }, SEC) {
                        Ok(Outcome::Decision(d)) => assert!(d.allowed),
                        Err(CheckError::Store(StoreError::Full { .. })) => refused += 1,
                        other => panic!("{other:?}"),
                    }
                }
                refused
            })
        })
        .collect();
    for flooder in flooders {
        flooder.join().unwrap();
    }
    for key in &limited {
        assert!(!allowed(&store, key, &rule, SEC), "{key:?} still limited");
    }
    let stats = store.stats();
    assert!(stats.evictions > 0);
    // The rule's lock-free table (1.25 slots a record of its share, 128) and the general
    // path's capacity.
    assert!(stats.len <= 160 + 256, "{} records", stats.len);
}

/// A scope given a share of its own keeps its string keys on the general path, which
/// bounds the share (the builder's `scope_share`): its flood holds at most that share.
#[test]
fn a_scope_with_its_own_share_keeps_string_keys_on_the_general_path() {
    let rule = Rule::fixed_window(1, Duration::from_secs(3600))
        .unwrap()
        .named("overrides");
    let store = MemoryStore::builder()
        .capacity(6400)
        .scope_share(rule.scope(), 10)
        .build();
    for i in 0..2000 {
        let key = Key::new(format!("override-{i}")).unwrap();
        let _ = store.apply_scoped_now(&key, &rule, Op::Check { cost: 1 }, SEC);
    }
    assert_eq!(store.lock_free_len(SEC), 0);
    assert!(store.len() <= 640, "{}", store.len());
}

/// Short string keys that are all limited fill the rule's lock-free table (its slots:
/// 1.25 a record of the rule's share), then the general path's capacity; the next new key
/// is refused (fail closed), and the limited keys stay limited.
#[test]
fn limited_string_keys_fill_the_table_then_the_capacity_then_fail_closed() {
    let store = MemoryStore::builder()
        .capacity(4)
        .shards(1)
        .rule_share(100)
        .build();
    let rule = Rule::fixed_window(1, Duration::from_secs(60)).unwrap();
    let key = |i: u64| Key::new(format!("key-{i}")).unwrap();
    // A table for 4 records: 5 slots, two buckets of four (every key's two).
    for i in 0..12u64 {
        assert!(allowed(&store, &key(i), &rule, SEC), "key {i}");
    }
    assert_eq!(store.lock_free_len(SEC), 8);
    assert_eq!(
        store.apply_scoped_now(&key(99), &rule, Op::Check { cost: 1 }, SEC),
        Err(CheckError::Store(StoreError::Full { capacity: 4 }))
    );
    for i in 0..12u64 {
        assert!(
            !allowed(&store, &key(i), &rule, SEC),
            "key {i} still limited"
        );
    }
    assert!(allowed(&store, &key(99), &rule, 61 * SEC));
}

/// A limited string key the lock-free table holds goes into the state file and comes back
/// limited in a new store, under every one-word rule; a key that is not limited is left out.
#[test]
fn limited_string_keys_of_the_lock_free_table_survive_a_restart() {
    for rule in one_word_rules(2) {
        let store = MemoryStore::default();
        let (limited, idle) = (Key::new("10.1.2.3").unwrap(), Key::new("10.1.2.4").unwrap());
        assert!(allowed(&store, &limited, &rule, SEC) && allowed(&store, &limited, &rule, SEC));
        assert!(allowed(&store, &idle, &rule, SEC));
        assert_eq!(store.lock_free_len(SEC), 2, "both lock-free");
        let rule_of = |scope: u64| (scope == rule.scope()).then_some(rule);
        let bytes = store.export_limited(SEC, rule_of).encode().unwrap();
        let snapshot = super::super::StateSnapshot::decode(&bytes).unwrap();
        assert_eq!(
            snapshot.records.len(),
            1,
            "only the limited key, under {rule:?}"
        );
        let restarted = MemoryStore::default();
        let report = restarted.import(&snapshot, SEC, Duration::from_secs(60), rule_of);
        assert_eq!(report.restored, 1, "{report:?}");
        assert!(!allowed(&restarted, &limited, &rule, SEC), "{rule:?}");
        assert!(allowed(&restarted, &idle, &rule, SEC));
    }
}
