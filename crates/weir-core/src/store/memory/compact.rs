//! The memory store's lock-free path: records of 8-byte keys (`Key::from(u64)`, a packed
//! IPv4 address and port, …) under rules whose state is one word ([`WordMeter`]: GCRA, a
//! token bucket that starts full, a fixed window; no lockout), one 16-byte slot each:
//! `[key | word]`, read with one 16-byte atomic load and changed with one 16-byte
//! compare-and-swap. A hot key does not serialise on a lock, and a denial is a plain read.
//! Everything else (other algorithms, other key lengths, guards, penalties, inspect, …)
//! takes the general path (`general.rs`), which first moves a key it finds here over to
//! itself, so a (scope, key) lives in one place at a time.
//!
//! Where this sits in a decision: `MemoryStore::apply_scoped` → `Tables::table` (`tables.rs`) for the
//! rule's scope → [`Table::check`]; `Absent` sends the caller to the insert path (under a
//! stripe lock, after asking the general table), which claims a slot with
//! [`Table::claim`].
//!
//! - The decision is [`WordMeter::check`]: the algorithm's one Rust copy, run on the state
//!   the slot's word decodes to, the same step the general path and every store run (the
//!   conformance suite compares).
//! - A table reads its words under the meter of the rule that made it: a check whose rule
//!   reads them otherwise (a named rule whose parameters changed, another algorithm) takes
//!   the general path, which moves the record over, decoded by the table's meter.
//! - A slot's key is part of the value the CAS compares, so an update can never land on
//!   another key's slot, whatever was evicted or claimed meanwhile.
//! - A slot is free when its word has expired (equivalent to fresh); word 0 marks a slot
//!   vacated by a move to the general table (or never used), which no key reuses without
//!   the insert path's checks.
//! - Each key may sit in two buckets of four slots (one cache line each), and sits in its
//!   first while that has room: a check reads the first bucket's slots in order until
//!   the key's (one cache line), and reads the second only when the key is not in the
//!   first (about one key in six, at the table's load). When both buckets are full, a
//!   record of one of them that sits in its key's first bucket moves to its key's
//!   second (copied, then the original vacated, under that key's shard lock so it
//!   cannot also move to the general table meanwhile), which leaves about one key in a
//!   thousand with no slot; such a key goes to the general table. Moves are looked for
//!   only while the table holds less than it is sized for. Once the table holds as many records as it is sized for, the least recently
//!   used record that is not limited (its next check would pass) is evicted instead, and
//!   if every one is limited the key goes to the general table, which has its own
//!   capacity and refusal rules. ("Least recently used" is read from the word's expiry:
//!   the record that frees up first.)

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use portable_atomic::AtomicU128;

use super::chunks::{two_buckets, Chunks};
use super::word::WordMeter;
use crate::algorithm::{GcraState, Meter};
use crate::decision::Decision;

/// Slots per bucket: four 16-byte slots fill one 64-byte cache line.
const SLOTS: usize = 4;
/// Locks that serialise the insert path, by key hash (a key always takes the same one).
const STRIPES: usize = 256;
/// The most scopes (rules) given a table; further ones take the general path.
pub(super) const MAX_TABLES: usize = 8;

#[derive(Default)]
#[repr(C, align(64))]
struct Bucket([AtomicU128; SLOTS]);

impl Bucket {
    /// The slot holding `key`'s record (not vacated) and what it held: the slots are read
    /// in order until the key's. (Reading all four and picking the key out without a
    /// branch was tried: no faster at a million keys, where the bucket's cache miss hides
    /// the other loads, and 12 ns slower on a hot key, where nothing hides them; each
    /// 16-byte load is a call into `portable-atomic`. docs/benchmarks-history.md, "Memory store, one
    /// cache line a check".)
    #[inline(always)]
    fn find(&self, key: u64) -> Option<(&AtomicU128, u128)> {
        self.0.iter().find_map(|slot| {
            let seen = slot.load(Ordering::Acquire);
            let (k, word) = unpack(seen);
            (k == key && word != 0).then_some((slot, seen))
        })
    }
}

/// Buckets per chunk: 1024 buckets of 64 bytes, 64 KiB. A table is its chunks, each
/// allocated when a key first needs one of its buckets: making a bucket writes it, so a
/// table made whole would be resident whole from its first key (10 MiB for the default
/// store's rule share); made by chunks, a table holding few keys holds few chunks. Why
/// 64 KiB and not a 4 KiB page: a check finds its bucket's chunk in the chunks' index
/// first, and an index of 16 entries a MiB of table stays in the L1 cache (at 4 KiB,
/// 256 entries a MiB did not: 4-7 ns more a check at a million keys, BENCHMARKS.md,
/// "Memory store, one cache line a check"). The price is memory for a table holding few keys
/// (100 keys: 4.5 MB resident, against 0.8 MB with 4 KiB chunks).
const CHUNK: usize = 1024;

/// The insert-path locks of a table, `STRIPES` of them.
pub(super) fn stripes() -> Box<[Mutex<()>]> {
    std::iter::repeat_with(|| Mutex::new(()))
        .take(STRIPES)
        .collect()
}

/// The insert-path lock of the key whose hash is `hash` (a key always takes the same one).
pub(super) fn stripe(stripes: &[Mutex<()>], hash: u64) -> MutexGuard<'_, ()> {
    let i = usize::try_from(hash % STRIPES as u64).unwrap_or(0);
    stripes[i].lock().unwrap_or_else(PoisonError::into_inner)
}

/// A slot's value: the key in the low half, the state's word in the high half.
#[inline]
pub(super) fn pack(key: u64, word: u64) -> u128 {
    (u128::from(word) << 64) | u128::from(key)
}

#[inline]
pub(super) fn unpack(v: u128) -> (u64, u64) {
    let [k0, k1, k2, k3, k4, k5, k6, k7, t0, t1, t2, t3, t4, t5, t6, t7] = v.to_le_bytes();
    (
        u64::from_le_bytes([k0, k1, k2, k3, k4, k5, k6, k7]),
        u64::from_le_bytes([t0, t1, t2, t3, t4, t5, t6, t7]),
    )
}

/// One scope's table.
pub(super) struct Table {
    /// How the words are read: the meter of the rule that made the table.
    pub(super) meter: WordMeter,
    /// The buckets, `CHUNK` to a chunk, each chunk made on first use.
    chunks: Chunks<Bucket, CHUNK>,
    stripes: Box<[Mutex<()>]>,
    pub(super) evictions: AtomicU64,
    /// Records moved to their key's second bucket to make room for a new key.
    pub(super) moves: AtomicU64,
    /// Slots holding a record (live or expired, not vacated): eviction starts at `records`.
    held: AtomicUsize,
    /// The records the table is sized for (the rule's share of the capacity).
    pub(super) records: usize,
}

/// What [`Table::check`] found.
pub(super) enum Found {
    /// The key's record was here: the decision, already applied.
    Decided(Decision),
    /// Not here (or vacated): take the insert path.
    Absent,
}

/// What [`Table::claim`] did.
pub(super) enum Claimed {
    /// A slot holds the key now: the decision, already applied.
    Decided(Decision),
    /// Both buckets hold limited records only: the general table must take the key.
    Full,
}

impl Table {
    pub(super) fn new(records: usize, meter: WordMeter) -> Self {
        Self {
            meter,
            chunks: Chunks::for_records(records, SLOTS),
            stripes: stripes(),
            evictions: AtomicU64::new(0),
            moves: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            records,
        }
    }

    /// The bucket at `index`, if its chunk has been made (a bucket of a chunk not made yet
    /// holds no key).
    #[inline(always)]
    fn bucket(&self, index: usize) -> Option<&Bucket> {
        self.chunks.get(index)
    }

    /// The key's two buckets, where their chunks have been made.
    #[cfg(test)]
    fn buckets_of(&self, hash: u64) -> [Option<&Bucket>; 2] {
        self.indices(hash).map(|i| self.bucket(i))
    }

    /// The bucket at `index`, its chunk made if need be (the insert path).
    fn bucket_made(&self, index: usize) -> Option<&Bucket> {
        self.chunks.made(index)
    }

    /// The key's two buckets, their chunks made if need be.
    fn buckets_made(&self, hash: u64) -> [Option<&Bucket>; 2] {
        self.indices(hash).map(|i| self.bucket_made(i))
    }

    /// Every bucket made so far.
    fn made(&self) -> impl Iterator<Item = &Bucket> + '_ {
        self.chunks.iter()
    }

    /// The indices of the key's two buckets (distinct when there are two or more).
    #[inline]
    fn indices(&self, hash: u64) -> [usize; 2] {
        two_buckets(hash, self.chunks.len())
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
        key: u64,
        meter: &WordMeter,
        cost: u64,
        now_ns: u64,
    ) -> Found {
        // A denial or a peek leaves the word as it was: a read. GCRA's step is matched out
        // of the loop, so the common case runs with no dispatch inside it.
        let decided = match meter {
            WordMeter::Gcra { gcra, .. } => self.update(hash, key, |tat_ns| {
                let mut state = GcraState { tat_ns };
                let decision = gcra.check(&mut state, now_ns, cost);
                (state.tat_ns, decision)
            }),
            WordMeter::FixedWindow { .. } | WordMeter::Weighted { .. } => {
                self.update(hash, key, |word| {
                    let (decision, next) = meter.check(word, now_ns, cost);
                    (next, decision)
                })
            }
        };
        decided.map_or(Found::Absent, Found::Decided)
    }

    /// Takes the key's record out (to the general table): its word, if it holds one, and
    /// the slot is vacated. Run under the general table's lock for the key.
    pub(super) fn take(&self, hash: u64, key: u64) -> Option<u64> {
        let word = self.update(hash, key, |word| (0, word))?;
        self.held.fetch_sub(1, Ordering::Relaxed);
        Some(word)
    }

    /// Finds the key's slot in `buckets` and replaces its word by the first half of what
    /// `f` makes of it (by compare-and-swap; unchanged, nothing is written), returning the
    /// second half; `None` when the key holds no slot. The key's first bucket is read
    /// first, and the second only if the key is not in the first: most keys sit in their
    /// first (placement prefers it), so most checks read one cache line.
    #[inline(always)]
    fn update<R>(&self, hash: u64, key: u64, mut f: impl FnMut(u64) -> (u64, R)) -> Option<R> {
        'retry: loop {
            // The second bucket is looked up only if the key is not in the first.
            for index in self.indices(hash) {
                let Some((slot, seen)) = self.bucket(index).and_then(|b| b.find(key)) else {
                    continue;
                };
                let word = unpack(seen).1;
                let (next, made) = f(word);
                if next == word
                    || slot
                        .compare_exchange(
                            seen,
                            pack(key, next),
                            Ordering::AcqRel,
                            Ordering::Acquire,
                        )
                        .is_ok()
                {
                    return Some(made);
                }
                // Changed meanwhile (another check, an eviction, a move): look again.
                continue 'retry;
            }
            return None;
        }
    }

    /// Places a key that is not here (the caller holds its stripe lock, and made sure the
    /// general table does not hold it) and decides its check. In order: a free slot of the
    /// key's first bucket, then of its second; else, while the table holds less than it is
    /// sized for, a record of either bucket that sits in its own first bucket moves to a
    /// free slot of its second ([`Self::relocate`]), making room; else, once the table
    /// holds what it is sized for, the least recently used record whose next check would
    /// pass is evicted (no move is looked for then).
    ///
    /// `exclusive(other)` computes another key's hash and takes what keeps that key's
    /// record from being moved to the general table meanwhile (its shard's lock), or says
    /// it cannot now (`None`: that key is not moved).
    pub(super) fn claim<G>(
        &self,
        hash: u64,
        key: u64,
        (meter, cost, now_ns): (&WordMeter, u64, u64),
        exclusive: impl Fn(u64) -> Option<(u64, G)>,
    ) -> Claimed {
        let (decision, word) = meter.check(0, now_ns, cost);
        if word == 0 || self.meter.expires_ns(word) <= now_ns {
            // A peek, or a denial of a fresh key (cost above the limit is refused before):
            // nothing to keep.
            return Claimed::Decided(decision);
        }
        let next = pack(key, word);
        'choose: loop {
            // The second bucket's chunk is made only if the first bucket is full.
            for bucket in self
                .indices(hash)
                .into_iter()
                .filter_map(|i| self.bucket_made(i))
            {
                if let Some((slot, seen)) = self.free_slot(bucket, now_ns) {
                    if self.put(slot, seen, next) {
                        return Claimed::Decided(decision);
                    }
                    continue 'choose;
                }
            }
            break;
        }
        let buckets = self.buckets_made(hash);
        // Moves make room while the table holds less than it is sized for. Once it holds
        // that much, a new key evicts instead: under a flood of new keys every bucket is
        // full, and looking for a move (each candidate's own second bucket, a cache miss,
        // and its shard's lock) would only cost each new key time before the eviction it
        // ends in (docs/benchmarks-history.md, "Memory store, one cache line a check": half the flood's
        // throughput).
        if self.held.load(Ordering::Relaxed) < self.records {
            for bucket in buckets.into_iter().flatten() {
                if let Some((slot, seen)) = self.relocate(bucket, now_ns, &exclusive) {
                    if self.put(slot, seen, next) {
                        return Claimed::Decided(decision);
                    }
                }
            }
        }
        loop {
            // Evict only when the table holds what it is sized for; before that a key
            // whose two buckets are full goes to the general path.
            if self.held.load(Ordering::Relaxed) < self.records {
                return Claimed::Full;
            }
            // The least recently used record that is not limited.
            let mut victim: Option<(&AtomicU128, u128, u64)> = None;
            for slot in buckets.into_iter().flatten().flat_map(|b| &b.0) {
                let seen = slot.load(Ordering::Acquire);
                let (_, word) = unpack(seen);
                let expires_ns = self.meter.expires_ns(word);
                if victim.is_none_or(|(_, _, oldest)| expires_ns < oldest)
                    && meter.allows_one_more(word, now_ns)
                {
                    victim = Some((slot, seen, expires_ns));
                }
            }
            let Some((slot, seen, _)) = victim else {
                return Claimed::Full;
            };
            if slot
                .compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if unpack(seen).1 == 0 {
                    self.held.fetch_add(1, Ordering::Relaxed);
                } else {
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                }
                return Claimed::Decided(decision);
            }
            // Another key took it, or its record changed: choose again.
        }
    }

    /// A free slot of `bucket` (vacated, or holding a record that has expired: equivalent
    /// to fresh) and what it holds.
    fn free_slot<'b>(&self, bucket: &'b Bucket, now_ns: u64) -> Option<(&'b AtomicU128, u128)> {
        bucket.0.iter().find_map(|slot| {
            let seen = slot.load(Ordering::Acquire);
            (self.meter.expires_ns(unpack(seen).1) <= now_ns).then_some((slot, seen))
        })
    }

    /// Writes `next` into a slot that held `seen` (free), counting it held if it was
    /// vacated. False if the slot changed meanwhile.
    fn put(&self, slot: &AtomicU128, seen: u128, next: u128) -> bool {
        let put = slot
            .compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if put && unpack(seen).1 == 0 {
            self.held.fetch_add(1, Ordering::Relaxed);
        }
        put
    }

    /// Makes room in `bucket`: moves one of its records that sits in its key's first
    /// bucket to a free slot of that key's second bucket, and returns the slot it left
    /// (vacated) and what it holds now. Checks never lose the record meanwhile: it is
    /// copied first and the original vacated after, and as checks read a key's first
    /// bucket first they find the original until it is vacated, the copy after. A check
    /// that changes the original between the two makes the copy follow (the original is
    /// vacated only if it still holds what the copy holds). A record whose slot another
    /// key takes meanwhile (an eviction) or that is swept stays where the copy is, once.
    fn relocate<'b, G>(
        &self,
        bucket: &'b Bucket,
        now_ns: u64,
        exclusive: &impl Fn(u64) -> Option<(u64, G)>,
    ) -> Option<(&'b AtomicU128, u128)> {
        for slot in &bucket.0 {
            let seen = slot.load(Ordering::Acquire);
            let (other, word) = unpack(seen);
            if word == 0 || self.meter.expires_ns(word) <= now_ns {
                continue;
            }
            // Its key's shard lock, so the record is not moved to the general table while
            // it is in two slots.
            let Some((other_hash, _guard)) = exclusive(other) else {
                continue;
            };
            let [first, second] = self.buckets_made(other_hash);
            let (Some(first), Some(second)) = (first, second) else {
                continue;
            };
            if !std::ptr::eq(first, bucket) {
                // It sits in its second bucket: moved to its first, it would be found
                // there before the original is vacated, in two places at once.
                continue;
            }
            let Some((to, free)) = self.free_slot(second, now_ns) else {
                continue;
            };
            if let Some(left) = self.copy_then_vacate((slot, seen), (to, free)) {
                return Some((slot, left));
            }
        }
        None
    }

    /// The move itself (see [`Self::relocate`]): copies the record `from` held when it was
    /// read (`original`) into `to` (which held `free`), then vacates `from`. Returns what
    /// `from` holds after, or `None` if nothing was moved.
    fn copy_then_vacate(
        &self,
        (from, mut original): (&AtomicU128, u128),
        (to, free): (&AtomicU128, u128),
    ) -> Option<u128> {
        let key = unpack(original).0;
        if !self.put(to, free, original) {
            return None;
        }
        let mut copy = original;
        loop {
            let vacated = pack(key, 0);
            match from.compare_exchange(original, vacated, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    self.held.fetch_sub(1, Ordering::Relaxed);
                    self.moves.fetch_add(1, Ordering::Relaxed);
                    return Some(vacated);
                }
                Err(now) if unpack(now).0 == key && unpack(now).1 != 0 => {
                    // A check changed the original: the copy follows, then try again.
                    if to
                        .compare_exchange(copy, now, Ordering::AcqRel, Ordering::Acquire)
                        .is_err()
                    {
                        // The copy was taken by another key (evicted): the original stays.
                        return None;
                    }
                    (original, copy) = (now, now);
                }
                Err(_) => {
                    // The original was taken by another key or swept: the copy is the
                    // record now, unless it was also taken.
                    return None;
                }
            }
        }
    }

    /// Live records (expiring after `now_ns`).
    pub(super) fn live(&self, now_ns: u64) -> usize {
        self.slots()
            .filter(|(_, word)| self.meter.expires_ns(*word) > now_ns)
            .count()
    }

    /// Records held (not vacated; some may have expired and not been swept).
    pub(super) fn occupied(&self) -> usize {
        self.slots().filter(|(_, word)| *word != 0).count()
    }

    /// Vacates every expired slot. Returns how many.
    pub(super) fn sweep(&self, now_ns: u64) -> usize {
        let mut gone = 0;
        for slot in self.made().flat_map(|b| &b.0) {
            let seen = slot.load(Ordering::Acquire);
            let (_, word) = unpack(seen);
            if word != 0
                && self.meter.expires_ns(word) <= now_ns
                && slot
                    .compare_exchange(seen, 0, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            {
                self.held.fetch_sub(1, Ordering::Relaxed);
                gone += 1;
            }
        }
        gone
    }

    pub(super) fn slots(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.made()
            .flat_map(|b| &b.0)
            .map(|s| unpack(s.load(Ordering::Acquire)))
    }

    /// Bytes the table takes: its chunks made so far, and the chunks' index.
    pub(super) fn bytes(&self) -> usize {
        self.chunks.bytes()
    }
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
