//! The string-key table's unit tests (`strings.rs`): keys verified in full (one hash,
//! several keys), reserved slots, eviction at capacity never taking a limited record.
//! Through the store: `strings_store_tests.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::Rule;

const SEC: u64 = 1_000_000_000;

/// A table under GCRA, two a second with a burst of two.
fn table(records: usize) -> Table {
    let rule = Rule::gcra(2, std::time::Duration::from_secs(1), 2).unwrap();
    Table::new(records, WordMeter::of(&rule).unwrap())
}

fn probe(hash: u64, key: &str) -> Probe {
    Probe::new(hash, key.as_bytes()).unwrap()
}

fn claim(table: &Table, hash: u64, key: &str, cost: u64) -> Claimed {
    let meter = table.meter;
    table.claim(hash, &probe(hash, key), (&meter, cost, SEC))
}

/// What a peek of the key says is left, if the table holds it.
fn remaining(table: &Table, hash: u64, key: &str) -> Option<u64> {
    let meter = table.meter;
    match table.check(hash, &probe(hash, key), &meter, 0, SEC) {
        Found::Decided(d) => Some(d.remaining),
        Found::Absent => None,
    }
}

/// A seeded hash, as the store gives the table.
fn key_hash() -> impl Fn(&str) -> u64 {
    let hasher = foldhash::quality::RandomState::default();
    move |k| std::hash::BuildHasher::hash_one(&hasher, k)
}

/// Two keys of one hash and one length (one tag but the generation) each have a record of
/// their own; a third of the same hash and length is not found in either.
#[test]
fn two_keys_with_one_hash_never_share_a_record() {
    let table = table(1024);
    let hash = 0x5EED;
    assert!(matches!(claim(&table, hash, "2001:db8::1", 1), Claimed::Decided(d) if d.allowed));
    assert!(matches!(claim(&table, hash, "2001:db8::2", 2), Claimed::Decided(d) if d.allowed));
    assert_eq!(remaining(&table, hash, "2001:db8::1"), Some(1));
    assert_eq!(remaining(&table, hash, "2001:db8::2"), Some(0));
    assert_eq!(remaining(&table, hash, "2001:db8::3"), None);
    // Keys alike but for their last byte, 48 bytes long (the last key word).
    let (a, b) = ("k".repeat(47) + "a", "k".repeat(47) + "b");
    assert!(matches!(claim(&table, hash, &a, 2), Claimed::Decided(d) if d.allowed));
    assert_eq!(remaining(&table, hash, &b), None);
    assert!(matches!(claim(&table, hash, &b, 1), Claimed::Decided(d) if d.allowed));
    assert_eq!(remaining(&table, hash, &a), Some(0));
    assert_eq!(remaining(&table, hash, &b), Some(1));
    assert_eq!(table.occupied(), 4);
}

/// Keys this table does not hold: empty, or longer than a slot's 48 bytes.
#[test]
fn only_keys_of_1_to_48_bytes_have_a_probe() {
    assert!(Probe::new(1, b"").is_none());
    assert!(Probe::new(1, &[b'x'; MAX_KEY_LEN]).is_some());
    assert!(Probe::new(1, &[b'x'; MAX_KEY_LEN + 1]).is_none());
}

/// The slot a claim gave "user:alice" in `table`.
fn alice_s_slot(table: &Table, hash: u64) -> &Slot {
    assert!(matches!(
        claim(table, hash, "user:alice", 1),
        Claimed::Decided(_)
    ));
    let held = |s: &&Slot| unpack(s.head.load(Ordering::Acquire)).1 != 0;
    table.made().find(held).unwrap()
}

/// A slot reserved by a claim (its key's bytes being written) is not found by a check, nor
/// taken by another claim, nor swept.
#[test]
fn a_reserved_slot_is_neither_found_nor_free() {
    let (table, hash) = (table(1024), 0x5EED);
    let slot = alice_s_slot(&table, hash);
    let (tag, _) = unpack(slot.head.load(Ordering::Acquire));
    // Reserved for a next key, the old key's bytes still there.
    let reserved = pack(((tag >> GEN_SHIFT) + 1) << GEN_SHIFT | RESERVED, 0);
    slot.head.store(reserved, Ordering::Release);
    assert_eq!(remaining(&table, hash, "user:alice"), None);
    assert!(matches!(
        claim(&table, hash, "user:bobby", 1),
        Claimed::Decided(_)
    ));
    assert_eq!(slot.head.load(Ordering::Acquire), reserved, "not taken");
    assert_eq!(table.sweep(100 * SEC), 1, "bobby's record only");
    assert_eq!(slot.head.load(Ordering::Acquire), reserved, "not swept");
}

/// The bytes of a slot whose tag changes between the two reads of it are not a match: a
/// slot re-keyed to another key of the same name bits after the check read its tag.
#[test]
fn a_slot_rekeyed_meanwhile_is_not_the_key_s() {
    let (table, hash) = (table(1024), 0x5EED);
    let slot = alice_s_slot(&table, hash);
    let alice = probe(hash, "user:alice");
    let seen = slot.holding(&alice).unwrap();
    // Re-keyed to another key (publish: a new generation), then its bytes made alice's
    // again by hand: the tag differs from the one alice's check read.
    assert!(table.publish(slot, seen, &probe(hash, "user:bobby"), unpack(seen).1));
    let (tag, word) = unpack(slot.head.load(Ordering::Acquire));
    assert_ne!(tag, unpack(seen).0, "a new generation");
    assert!(slot.holding(&alice).is_none());
    assert_eq!(
        unpack(slot.holding(&probe(hash, "user:bobby")).unwrap()),
        (tag, word)
    );
    // A CAS on what alice's check read fails.
    assert!(slot
        .head
        .compare_exchange(
            seen,
            pack(unpack(seen).0, 1),
            Ordering::AcqRel,
            Ordering::Acquire
        )
        .is_err());
}

/// Once the table holds what it is sized for, new keys evict records that are not limited,
/// never a limited one, and a key whose buckets hold only limited records is left to the
/// general table (`Full`).
#[test]
fn at_capacity_new_keys_evict_only_unlimited_records() {
    let table = table(64);
    let hash = key_hash();
    // Limited keys (their burst of two used) and unlimited ones, until full.
    let mut i = 0;
    let mut limited = Vec::new();
    while table.held.load(Ordering::Relaxed) < table.records {
        let key = format!("client-{i}");
        let cost = if i % 2 == 0 { 2 } else { 1 };
        if matches!(claim(&table, hash(&key), &key, cost), Claimed::Decided(_)) && cost == 2 {
            limited.push(key);
        }
        i += 1;
    }
    // A flood of keys that each use their burst: they evict the unlimited records, then
    // find only limited ones.
    let mut full = 0;
    for j in 0..2000 {
        let key = format!("flood-{j}");
        if matches!(claim(&table, hash(&key), &key, 2), Claimed::Full) {
            full += 1;
        }
    }
    assert!(
        table.evictions.load(Ordering::Relaxed) > 0,
        "new keys evicted"
    );
    assert!(full > 0, "some found only limited records");
    for key in &limited {
        assert_eq!(remaining(&table, hash(key), key), Some(0), "{key} kept");
    }
    let slots = table.chunks.len() * SLOTS;
    assert!(table.occupied() <= slots);
}
