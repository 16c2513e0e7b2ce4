//! The lock-free table's unit tests: where a key sits, moves between a key's two buckets
//! racing checks, and eviction at capacity (`compact.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::Rule;

const SEC: u64 = 1_000_000_000;

fn table(records: usize) -> Table {
    let rule = Rule::per_second(10).unwrap();
    Table::new(records, WordMeter::of(&rule).unwrap())
}

/// A seeded hash of a key, as the store gives the table (a fresh seed each time).
fn key_hash() -> impl Fn(u64) -> u64 {
    let hasher = foldhash::quality::RandomState::default();
    move |k| std::hash::BuildHasher::hash_one(&hasher, k)
}

fn check(table: &Table, hash: u64, key: u64, now_ns: u64) -> Found {
    let meter = table.meter;
    table.check(hash, key, &meter, 1, now_ns)
}

/// A new key goes to its first bucket while it has room, and a key in its second
/// bucket is found there.
#[test]
fn a_key_sits_in_its_first_bucket_and_is_found_in_either() {
    let table = table(1024);
    let meter = table.meter;
    let hash = 0x1234_5678_9ABC_DEF0;
    let exclusive = |_: u64| -> Option<(u64, ())> { None };
    assert!(matches!(
        table.claim(hash, 7, (&meter, 1, 10 * SEC), exclusive),
        Claimed::Decided(d) if d.allowed
    ));
    let [first, second] = table.buckets_of(hash);
    assert!(first.unwrap().find(7).is_some(), "in its first bucket");
    assert!(second.unwrap().find(7).is_none());
    // Another key placed in its second bucket by hand: found, and decided.
    let slot = &second.unwrap().0[3];
    slot.store(pack(8, 10 * SEC), Ordering::Release);
    assert!(matches!(check(&table, hash, 8, 10 * SEC), Found::Decided(d) if d.allowed));
    assert_ne!(
        unpack(slot.load(Ordering::Acquire)).1,
        10 * SEC,
        "written there"
    );
    assert!(matches!(check(&table, hash, 9, 10 * SEC), Found::Absent));
}

/// A check that changes the original between the copy and the vacate: the copy takes
/// the change, and the original is vacated only then.
#[test]
fn a_check_between_the_copy_and_the_vacate_is_carried_by_the_copy() {
    let table = table(1024);
    let (from, to) = (AtomicU128::new(0), AtomicU128::new(0));
    let (read, changed) = (pack(7, 5 * SEC), pack(7, 6 * SEC));
    from.store(changed, Ordering::Release);
    table.held.store(1, Ordering::Relaxed);
    let left = table.copy_then_vacate((&from, read), (&to, 0));
    assert_eq!(left, Some(pack(7, 0)));
    assert_eq!(from.load(Ordering::Acquire), pack(7, 0), "vacated");
    assert_eq!(
        to.load(Ordering::Acquire),
        changed,
        "the copy has the change"
    );
    assert_eq!(table.moves.load(Ordering::Relaxed), 1);
    assert_eq!(table.held.load(Ordering::Relaxed), 1, "one record, moved");
}

/// The original taken by another key meanwhile (evicted or swept): the copy is the
/// record, once; nothing is vacated.
#[test]
fn an_original_taken_meanwhile_leaves_the_record_in_the_copy() {
    let table = table(1024);
    let (from, to) = (AtomicU128::new(0), AtomicU128::new(0));
    let read = pack(7, 5 * SEC);
    from.store(pack(9, 8 * SEC), Ordering::Release);
    assert_eq!(table.copy_then_vacate((&from, read), (&to, 0)), None);
    assert_eq!(from.load(Ordering::Acquire), pack(9, 8 * SEC), "untouched");
    assert_eq!(to.load(Ordering::Acquire), read);
    assert_eq!(table.moves.load(Ordering::Relaxed), 0);
}

/// A free slot taken by another key before the copy: nothing moves.
#[test]
fn a_free_slot_taken_meanwhile_moves_nothing() {
    let table = table(1024);
    let (from, to) = (AtomicU128::new(0), AtomicU128::new(0));
    let read = pack(7, 5 * SEC);
    from.store(read, Ordering::Release);
    to.store(pack(9, 8 * SEC), Ordering::Release);
    assert_eq!(table.copy_then_vacate((&from, read), (&to, 0)), None);
    assert_eq!(from.load(Ordering::Acquire), read, "still the record");
    assert_eq!(to.load(Ordering::Acquire), pack(9, 8 * SEC));
}

/// Once the table holds what it is sized for, a new key whose buckets are full evicts
/// at once: no move is looked for (no other key's lock is asked for), as under a flood
/// of new keys every bucket is full and the search would only cost each key time.
#[test]
fn at_capacity_a_new_key_evicts_without_looking_for_moves() {
    let table = table(1024);
    let meter = table.meter;
    let hash = key_hash();
    let asked = std::cell::Cell::new(0u32);
    let exclusive = |k: u64| {
        asked.set(asked.get() + 1);
        Some((hash(k), ()))
    };
    let mut k = 0u64;
    while table.held.load(Ordering::Relaxed) < table.records {
        table.claim(hash(k), k, (&meter, 1, 10 * SEC), exclusive);
        k += 1;
    }
    assert!(asked.get() > 0, "moves were looked for on the way");
    asked.set(0);
    let moves = table.moves.load(Ordering::Relaxed);
    for k in k..k + 4096 {
        table.claim(hash(k), k, (&meter, 1, 10 * SEC), exclusive);
    }
    assert_eq!(asked.get(), 0, "no other key's lock was asked for");
    assert_eq!(table.moves.load(Ordering::Relaxed), moves, "nothing moved");
    assert!(
        table.evictions.load(Ordering::Relaxed) > 0,
        "new keys evicted"
    );
}

/// Keys whose two buckets are full make room by moving a record that sits in its first
/// bucket to its second: with moves, a table three quarters full sends under 1 % of its
/// keys to the general path (about 0.1 %), and every key is found where it went.
#[test]
fn full_buckets_make_room_by_moving_records() {
    let table = table(4096);
    let meter = table.meter;
    let hash = key_hash();
    let exclusive = |k: u64| Some((hash(k), ()));
    let keys = 3900u64;
    let full = (0..keys)
        .filter(|&k| {
            matches!(
                table.claim(hash(k), k, (&meter, 1, 10 * SEC), exclusive),
                Claimed::Full
            )
        })
        .count();
    assert!(table.moves.load(Ordering::Relaxed) > 0);
    // Without moves, about 4 % of the keys would find both buckets full.
    assert!(full * 100 <= 3900, "{full} keys found no room");
    let found = (0..keys)
        .filter(|&k| matches!(check(&table, hash(k), k, 10 * SEC), Found::Decided(_)))
        .count();
    assert_eq!(found, usize::try_from(keys).unwrap() - full);
    assert_eq!(table.occupied(), found, "each key held once");
}
