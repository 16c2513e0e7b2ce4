//! The memory store's lock-free path for string keys: records of keys of 1 to
//! [`MAX_KEY_LEN`] bytes other than 8 (an IPv4 or IPv6 address as text, a user id, a path;
//! 8-byte keys are `compact.rs`'s) under rules whose state is one word ([`WordMeter`]:
//! GCRA, a token bucket that starts full, a fixed window, the two-window weighted
//! estimate; no lockout), one 64-byte slot (one cache line) each:
//! `[tag | word | key bytes]`. The tag and the word are read with one 16-byte atomic load
//! and changed with one 16-byte compare-and-swap; a hot key does not serialise on a lock,
//! and a denial is a plain read. Everything else (longer keys, other algorithms, guards,
//! penalties, inspect, …) takes the general path (`general.rs`), which first moves a key
//! it finds here over to itself, so a (scope, key) lives in one place at a time.
//!
//! Where this sits in a decision: `MemoryStore::apply_scoped` → `Tables::table`
//! (`tables.rs`) for the rule's scope → [`Table::check`]; `Absent` sends the caller to the
//! insert path (`insert.rs`: under a stripe lock, after asking the general table), which
//! claims a slot with [`Table::claim`].
//!
//! **Identity: a record is its key, verified in full.** The tag is `generation (32 bits) |
//! 24 bits of the key's hash | a reserved bit | the key's length (7 bits)`; the key's bytes
//! sit beside it in the slot. A check reads a slot whose tag names its hash bits and
//! length, compares the bytes, then reads the tag again: the bytes are written only while
//! the slot is reserved (a tag of its own, a new generation), so an unchanged tag means the
//! bytes read were that tag's key (a sequence lock whose sequence is the tag). The update
//! then compares-and-swaps the (tag, word) it read, so it lands on that key's record or
//! not at all. Two keys with one hash (or one tag) never share a record. A stale tag could
//! only come back after 2^32 re-keyings of one slot during one check.
//!
//! **Claiming a slot** (the insert path, under the key's stripe lock and its shard lock):
//! the slot is reserved by CAS (from a free or evictable (tag, word) to a new generation
//! with the reserved bit, word 0), the key's bytes are written, then the (tag, word) is
//! published with one release store. A reserved slot is neither found, free nor evictable.
//! Key bytes live in the slot, never in an allocation: nothing to reclaim, and a key
//! longer than [`MAX_KEY_LEN`] takes the general path.
//!
//! **Bounded, as `compact.rs`'s table:** each key may sit in two buckets of four slots,
//! sized at 1.25 slots a record of the rule's share and made a 64 KiB chunk at a time.
//! Once the table holds as many records as it is sized for, a new key evicts the least
//! recently used record of its two buckets that is not limited (its next check would pass);
//! when both buckets hold only limited records (or before that, when they are full), the
//! key goes to the general table, which has its own capacity and refusal rules. Unlike
//! `compact.rs`'s table no record moves between its buckets to make room: a key whose two
//! buckets are full before the table is takes the general path (about 4 % of keys at three
//! quarters full), where it is decided exactly alike.

use std::sync::atomic::{fence, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use portable_atomic::AtomicU128;

use super::chunks::{two_buckets, Chunks};
use super::compact::{pack, stripe, stripes, unpack, Claimed, Found};
use super::word::WordMeter;

/// Slots per bucket.
const SLOTS: usize = 4;
/// Words of key bytes in a slot (48 bytes: with the 16-byte head, one cache line).
const KEY_WORDS: usize = 6;
/// The longest key this table holds, in bytes: an IPv6 address as text (39) and a prefix.
pub(super) const MAX_KEY_LEN: usize = KEY_WORDS * 8;
/// Buckets per chunk: 256 buckets of 256 bytes, 64 KiB (see `compact.rs`'s `CHUNK`).
const CHUNK: usize = 256;

/// The tag's bits: the key's length, the reserved bit, 24 bits of hash, the generation.
const LEN_MASK: u64 = 0x7F;
const RESERVED: u64 = 0x80;
const HASH_SHIFT: u32 = 8;
const HASH_MASK: u64 = 0xFF_FFFF << HASH_SHIFT;
const GEN_SHIFT: u32 = 32;
/// The bits that name a key (all but the generation).
const NAME_MASK: u64 = HASH_MASK | RESERVED | LEN_MASK;

/// One record: the head (`[tag | word]`, changed by CAS) and the key's bytes.
#[derive(Default)]
#[repr(C, align(64))]
struct Slot {
    head: AtomicU128,
    key: [AtomicU64; KEY_WORDS],
}

#[derive(Default)]
struct Bucket([Slot; SLOTS]);

/// A key as this table compares it, made once a check: the bits of its tag that name it,
/// and its bytes as words (zero past its end).
#[derive(Debug, Clone, Copy)]
pub(super) struct Probe {
    name: u64,
    words: [u64; KEY_WORDS],
}

impl Probe {
    /// The probe of a key of `hash` and `bytes`; `None` for a key this table does not hold
    /// (empty, or longer than [`MAX_KEY_LEN`]).
    #[inline]
    pub(super) fn new(hash: u64, bytes: &[u8]) -> Option<Self> {
        if bytes.is_empty() || bytes.len() > MAX_KEY_LEN {
            return None;
        }
        let mut words = [0u64; KEY_WORDS];
        for (word, chunk) in words.iter_mut().zip(bytes.chunks(8)) {
            let mut le = [0u8; 8];
            le.get_mut(..chunk.len())?.copy_from_slice(chunk);
            *word = u64::from_le_bytes(le);
        }
        let len = u64::try_from(bytes.len()).ok()?;
        Some(Self {
            name: ((hash << HASH_SHIFT) & HASH_MASK) | len,
            words,
        })
    }

    fn len(&self) -> usize {
        usize::try_from(self.name & LEN_MASK).unwrap_or(MAX_KEY_LEN)
    }
}

impl Slot {
    /// The slot's head if it holds `probe`'s key (a record, not vacated nor reserved),
    /// verified: the bytes compared, then the tag read again unchanged.
    #[inline(always)]
    fn holding(&self, probe: &Probe) -> Option<u128> {
        let seen = self.head.load(Ordering::Acquire);
        let (tag, word) = unpack(seen);
        if tag & NAME_MASK != probe.name || word == 0 {
            return None;
        }
        let used = probe.len().div_ceil(8);
        let same = self
            .key
            .iter()
            .zip(&probe.words)
            .take(used)
            .all(|(cell, w)| cell.load(Ordering::Relaxed) == *w);
        // The bytes were read before the tag is read again (the writer's side: `publish`).
        fence(Ordering::Acquire);
        let again = self.head.load(Ordering::Acquire);
        (same && unpack(again).0 == tag && unpack(again).1 != 0).then_some(again)
    }

    /// The key's bytes and the word, if the slot holds a record (read as `holding` does).
    fn read(&self) -> Option<(Vec<u8>, u64)> {
        let (tag, word) = unpack(self.head.load(Ordering::Acquire));
        if tag & RESERVED != 0 || word == 0 {
            return None;
        }
        let len = usize::try_from(tag & LEN_MASK).ok()?;
        let mut bytes: Vec<u8> = self
            .key
            .iter()
            .flat_map(|cell| cell.load(Ordering::Relaxed).to_le_bytes())
            .collect();
        fence(Ordering::Acquire);
        let (again, word) = unpack(self.head.load(Ordering::Acquire));
        if again != tag || word == 0 || len == 0 || len > MAX_KEY_LEN {
            return None;
        }
        bytes.truncate(len);
        Some((bytes, word))
    }
}

/// One scope's table of string keys.
pub(super) struct Table {
    /// How the words are read: the meter of the rule that made the table.
    pub(super) meter: WordMeter,
    chunks: Chunks<Bucket, CHUNK>,
    stripes: Box<[Mutex<()>]>,
    pub(super) evictions: AtomicU64,
    /// Slots holding a record or reserved for one: eviction starts at `records`.
    held: AtomicUsize,
    /// The records the table is sized for (the rule's share of the capacity).
    pub(super) records: usize,
}

impl Table {
    pub(super) fn new(records: usize, meter: WordMeter) -> Self {
        Self {
            meter,
            chunks: Chunks::for_records(records, SLOTS),
            stripes: stripes(),
            evictions: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            records,
        }
    }

    /// Every slot of the buckets made so far.
    fn made(&self) -> impl Iterator<Item = &Slot> + '_ {
        self.chunks.iter().flat_map(|bucket| &bucket.0)
    }

    /// The lock of the key's insert path.
    pub(super) fn stripe(&self, hash: u64) -> MutexGuard<'_, ()> {
        stripe(&self.stripes, hash)
    }

    /// Decides a check of `cost` (0: a peek) on the key's record if it is here.
    #[inline(always)]
    pub(super) fn check(
        &self,
        hash: u64,
        probe: &Probe,
        meter: &WordMeter,
        cost: u64,
        now_ns: u64,
    ) -> Found {
        let decided = self.update(hash, probe, |word| {
            let (decision, next) = meter.check(word, now_ns, cost);
            (next, decision)
        });
        decided.map_or(Found::Absent, Found::Decided)
    }

    /// Takes the key's record out (to the general table): its word, if it holds one, and
    /// the slot is vacated (word 0, the tag kept). Run under the general table's lock for
    /// the key.
    pub(super) fn take(&self, hash: u64, probe: &Probe) -> Option<u64> {
        let word = self.update(hash, probe, |word| (0, word))?;
        self.held.fetch_sub(1, Ordering::Relaxed);
        Some(word)
    }

    /// Finds the key's slot (its first bucket, then its second) and replaces its word by
    /// the first half of what `f` makes of it (by CAS of the verified (tag, word); unchanged,
    /// nothing is written), returning the second half; `None` when the key holds no slot.
    #[inline(always)]
    fn update<R>(&self, hash: u64, probe: &Probe, mut f: impl FnMut(u64) -> (u64, R)) -> Option<R> {
        'retry: loop {
            for index in two_buckets(hash, self.chunks.len()) {
                let Some(bucket) = self.chunks.get(index) else {
                    continue;
                };
                let Some((slot, seen)) = bucket
                    .0
                    .iter()
                    .find_map(|slot| Some((slot, slot.holding(probe)?)))
                else {
                    continue;
                };
                let (tag, word) = unpack(seen);
                let (next, made) = f(word);
                if next == word
                    || slot
                        .head
                        .compare_exchange(
                            seen,
                            pack(tag, next),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                {
                    return Some(made);
                }
                // Changed meanwhile (another check, an eviction, a sweep): look again.
                continue 'retry;
            }
            return None;
        }
    }

    /// Places a key that is not here (the caller holds its stripe lock and its shard's
    /// lock, and made sure the general table does not hold it) and decides its check: a
    /// free slot of its first bucket, then of its second; else, once the table holds what
    /// it is sized for, the least recently used record of the two that is not limited is
    /// evicted; else [`Claimed::Full`] (the general table takes the key).
    pub(super) fn claim(
        &self,
        hash: u64,
        probe: &Probe,
        (meter, cost, now_ns): (&WordMeter, u64, u64),
    ) -> Claimed {
        let (decision, word) = meter.check(0, now_ns, cost);
        if word == 0 || self.meter.expires_ns(word) <= now_ns {
            // A peek, or a denial of a fresh key: nothing to keep.
            return Claimed::Decided(decision);
        }
        let buckets = two_buckets(hash, self.chunks.len()).map(|i| self.chunks.made(i));
        'choose: loop {
            for bucket in buckets.into_iter().flatten() {
                if let Some((slot, seen)) = self.free_slot(bucket, now_ns) {
                    if self.publish(slot, seen, probe, word) {
                        return Claimed::Decided(decision);
                    }
                    continue 'choose;
                }
            }
            break;
        }
        loop {
            if self.held.load(Ordering::Relaxed) < self.records {
                return Claimed::Full;
            }
            // The least recently used record that is not limited (the one freeing first).
            let mut victim: Option<(&Slot, u128, u64)> = None;
            for slot in buckets.into_iter().flatten().flat_map(|b| &b.0) {
                let seen = slot.head.load(Ordering::Acquire);
                let (tag, word) = unpack(seen);
                if tag & RESERVED != 0 || word == 0 {
                    continue;
                }
                let expires_ns = self.meter.expires_ns(word);
                if victim.is_none_or(|(_, _, oldest)| expires_ns < oldest)
                    && self.meter.allows_one_more(word, now_ns)
                {
                    victim = Some((slot, seen, expires_ns));
                }
            }
            let Some((slot, seen, _)) = victim else {
                return Claimed::Full;
            };
            if self.publish(slot, seen, probe, word) {
                self.evictions.fetch_add(1, Ordering::Relaxed);
                return Claimed::Decided(decision);
            }
            // Another key took it, or its record changed: choose again.
        }
    }

    /// A free slot of `bucket` (vacated, never used, or holding a record that has
    /// expired: equivalent to fresh; not reserved) and what it holds.
    fn free_slot<'b>(&self, bucket: &'b Bucket, now_ns: u64) -> Option<(&'b Slot, u128)> {
        bucket.0.iter().find_map(|slot| {
            let seen = slot.head.load(Ordering::Acquire);
            let (tag, word) = unpack(seen);
            let free = tag & RESERVED == 0 && (word == 0 || self.meter.expires_ns(word) <= now_ns);
            free.then_some((slot, seen))
        })
    }

    /// Gives a slot that held `seen` to `probe`'s key with `word`: reserved by CAS (false if
    /// the slot changed meanwhile), the key's bytes written, then published. Counts the slot
    /// held if it held no record.
    fn publish(&self, slot: &Slot, seen: u128, probe: &Probe, word: u64) -> bool {
        let (tag, old) = unpack(seen);
        let generation = (tag >> GEN_SHIFT).wrapping_add(1) << GEN_SHIFT;
        let reserved = pack(generation | RESERVED, 0);
        if slot
            .head
            .compare_exchange(seen, reserved, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return false;
        }
        if old == 0 {
            self.held.fetch_add(1, Ordering::Relaxed);
        }
        // A reader that reads these bytes reads the reservation when it reads the tag again
        // (its acquire fence pairs with this release fence).
        fence(Ordering::Release);
        for (cell, w) in slot.key.iter().zip(probe.words) {
            cell.store(w, Ordering::Relaxed);
        }
        slot.head
            .store(pack(generation | probe.name, word), Ordering::Release);
        true
    }

    /// Live records (expiring after `now_ns`).
    pub(super) fn live(&self, now_ns: u64) -> usize {
        self.words()
            .filter(|word| self.meter.expires_ns(*word) > now_ns)
            .count()
    }

    /// Records held (not vacated; some may have expired and not been swept).
    pub(super) fn occupied(&self) -> usize {
        self.words().count()
    }

    /// The words of the slots holding a record.
    fn words(&self) -> impl Iterator<Item = u64> + '_ {
        self.made().filter_map(|slot| {
            let (tag, word) = unpack(slot.head.load(Ordering::Acquire));
            (tag & RESERVED == 0 && word != 0).then_some(word)
        })
    }

    /// Vacates every expired slot (its tag kept). Returns how many.
    pub(super) fn sweep(&self, now_ns: u64) -> usize {
        let mut gone = 0;
        for slot in self.made() {
            let seen = slot.head.load(Ordering::Acquire);
            let (tag, word) = unpack(seen);
            if tag & RESERVED == 0
                && word != 0
                && self.meter.expires_ns(word) <= now_ns
                && slot
                    .head
                    .compare_exchange(seen, pack(tag, 0), Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                self.held.fetch_sub(1, Ordering::Relaxed);
                gone += 1;
            }
        }
        gone
    }

    /// Every record held: its key's bytes and its word (a state snapshot reads them).
    pub(super) fn slots(&self) -> impl Iterator<Item = (Vec<u8>, u64)> + '_ {
        self.made().filter_map(Slot::read)
    }

    /// Bytes the table takes: its chunks made so far, and the chunks' index.
    pub(super) fn bytes(&self) -> usize {
        self.chunks.bytes()
    }
}

#[cfg(test)]
#[path = "strings_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "strings_store_tests.rs"]
mod store_tests;
