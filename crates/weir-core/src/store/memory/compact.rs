//! The memory store's lock-free path: records of 8-byte keys (`Key::from(u64)`, a packed
//! IPv4 address and port, …) under rules whose state is one word ([`WordMeter`]: GCRA, a
//! token bucket that starts full, a fixed window; no lockout), one 16-byte slot each:
//! `[key | word]`, read with one 16-byte atomic load and changed with one 16-byte
//! compare-and-swap. A hot key does not serialise on a lock, and a denial is a plain read.
//! Everything else (other algorithms, other key lengths, guards, penalties, inspect, …)
//! takes the general path (`general.rs`), which first moves a key it finds here over to
//! itself, so a (scope, key) lives in one place at a time.
//!
//! Where this sits in a decision: `MemoryStore::apply_scoped` → [`Tables::table`] for the
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
//! - Each key may sit in two buckets of four slots (one cache line each); when both are
//!   full of live records, the key goes to the general table; once the table holds as many
//!   records as it is sized for, the least recently used record that is not limited (its
//!   next check would pass) is evicted instead, and if every one is limited the key goes
//!   to the general table, which has its own capacity and refusal rules. ("Least recently
//!   used" is read from the word's expiry: the record that frees up first.)

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use portable_atomic::AtomicU128;

use super::word::WordMeter;
use crate::algorithm::{GcraState, Meter};
use crate::decision::Decision;

/// Slots per bucket: four 16-byte slots fill one 64-byte cache line.
const SLOTS: usize = 4;
/// Locks that serialise the insert path, by key hash (a key always takes the same one).
const STRIPES: usize = 256;
/// The most scopes (rules) given a table; further ones take the general path.
pub(super) const MAX_TABLES: usize = 8;
/// Slots per record of capacity: room so that two-choice buckets rarely overflow.
const SLOTS_PER_RECORD_NUM: usize = 5;
const SLOTS_PER_RECORD_DEN: usize = 4;

#[derive(Default)]
#[repr(C, align(64))]
struct Bucket([AtomicU128; SLOTS]);

/// Buckets per chunk: 64 buckets of 64 bytes, one 4 KiB page. A table is its chunks, each
/// allocated when a key first needs one of its buckets: making a bucket writes it, so a
/// table made whole would be resident whole from its first key (10 MiB for the default
/// store's rule share); made by chunks, a table holding few keys holds few pages.
const CHUNK: usize = 64;

/// One chunk of a table's buckets.
struct Chunk([Bucket; CHUNK]);

impl Chunk {
    fn new() -> Box<Self> {
        Box::new(Self(std::array::from_fn(|_| Bucket::default())))
    }
}

/// A slot's value: the key in the low half, the state's word in the high half.
#[inline]
fn pack(key: u64, word: u64) -> u128 {
    (u128::from(word) << 64) | u128::from(key)
}

#[inline]
fn unpack(v: u128) -> (u64, u64) {
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
    chunks: Box<[OnceLock<Box<Chunk>>]>,
    /// How many buckets the table has (made or not).
    buckets: usize,
    stripes: Box<[Mutex<()>]>,
    evictions: AtomicU64,
    /// Slots holding a record (live or expired, not vacated): eviction starts at `records`.
    held: AtomicUsize,
    /// The records the table is sized for (the rule's share of the capacity).
    records: usize,
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
    fn new(records: usize, meter: WordMeter) -> Self {
        let slots = records.saturating_mul(SLOTS_PER_RECORD_NUM) / SLOTS_PER_RECORD_DEN;
        let buckets = slots.div_ceil(SLOTS).max(2);
        Self {
            meter,
            chunks: std::iter::repeat_with(OnceLock::new)
                .take(buckets.div_ceil(CHUNK))
                .collect(),
            buckets,
            stripes: std::iter::repeat_with(|| Mutex::new(()))
                .take(STRIPES)
                .collect(),
            evictions: AtomicU64::new(0),
            held: AtomicUsize::new(0),
            records,
        }
    }

    /// The key's two buckets, where their chunks have been made (a bucket of a chunk not
    /// made yet holds no key).
    #[inline]
    fn buckets_of(&self, hash: u64) -> [Option<&Bucket>; 2] {
        self.indices(hash).map(|i| {
            let chunk = self.chunks.get(i / CHUNK)?.get()?;
            chunk.0.get(i % CHUNK)
        })
    }

    /// The key's two buckets, their chunks made if need be (the insert path).
    fn buckets_made(&self, hash: u64) -> [Option<&Bucket>; 2] {
        self.indices(hash).map(|i| {
            let chunk = self.chunks.get(i / CHUNK)?.get_or_init(Chunk::new);
            chunk.0.get(i % CHUNK)
        })
    }

    /// Every bucket made so far.
    fn made(&self) -> impl Iterator<Item = &Bucket> + '_ {
        self.chunks
            .iter()
            .filter_map(OnceLock::get)
            .flat_map(|chunk| &chunk.0)
    }

    /// The indices of the key's two buckets (distinct when there are two or more).
    #[inline]
    fn indices(&self, hash: u64) -> [usize; 2] {
        let n = self.buckets;
        let reduce = |h: u64| {
            let i = (u128::from(h) * (n as u128)) >> 64;
            usize::try_from(i).unwrap_or(0)
        };
        let first = reduce(hash);
        let mut second = reduce(hash.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15);
        if second == first {
            second = (first + 1) % n;
        }
        [first, second]
    }

    /// The lock of the key's insert path.
    pub(super) fn stripe(&self, hash: u64) -> MutexGuard<'_, ()> {
        let i = usize::try_from(hash % STRIPES as u64).unwrap_or(0);
        self.stripes[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
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
        let buckets = self.buckets_of(hash);
        // Start the second bucket's cache line on its way while the first is scanned: the
        // two misses overlap instead of adding up.
        if let Some(second) = buckets[1] {
            std::hint::black_box(second.0[0].load(Ordering::Relaxed));
        }
        // A denial or a peek leaves the word as it was: a read. GCRA's step is matched out
        // of the loop, so the common case runs with no dispatch inside it.
        let decided = match meter {
            WordMeter::Gcra { gcra, .. } => self.update(buckets, key, |tat_ns| {
                let mut state = GcraState { tat_ns };
                let decision = gcra.check(&mut state, now_ns, cost);
                (state.tat_ns, decision)
            }),
            WordMeter::FixedWindow { .. } => self.update(buckets, key, |word| {
                let (decision, next) = meter.check(word, now_ns, cost);
                (next, decision)
            }),
        };
        decided.map_or(Found::Absent, Found::Decided)
    }

    /// Takes the key's record out (to the general table): its word, if it holds one, and
    /// the slot is vacated. Run under the general table's lock for the key.
    pub(super) fn take(&self, hash: u64, key: u64) -> Option<u64> {
        let word = self.update(self.buckets_of(hash), key, |word| (0, word))?;
        self.held.fetch_sub(1, Ordering::Relaxed);
        Some(word)
    }

    /// Finds the key's slot in `buckets` and replaces its word by the first half of what
    /// `f` makes of it (by compare-and-swap; unchanged, nothing is written), returning the
    /// second half; `None` when the key holds no slot.
    #[inline(always)]
    fn update<R>(
        &self,
        buckets: [Option<&Bucket>; 2],
        key: u64,
        mut f: impl FnMut(u64) -> (u64, R),
    ) -> Option<R> {
        'retry: loop {
            for bucket in buckets.into_iter().flatten() {
                for slot in &bucket.0 {
                    let seen = slot.load(Ordering::Acquire);
                    let (k, word) = unpack(seen);
                    if k != key || word == 0 {
                        continue;
                    }
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
            }
            return None;
        }
    }

    /// Places a key that is not here (the caller holds its stripe lock and made sure the
    /// general table does not hold it) and decides its check. A free slot first; else the
    /// least recently used record whose next check would pass is evicted.
    pub(super) fn claim(
        &self,
        hash: u64,
        key: u64,
        meter: &WordMeter,
        cost: u64,
        now_ns: u64,
    ) -> Claimed {
        let (decision, word) = meter.check(0, now_ns, cost);
        if word == 0 || self.meter.expires_ns(word) <= now_ns {
            // A peek, or a denial of a fresh key (cost above the limit is refused before):
            // nothing to keep.
            return Claimed::Decided(decision);
        }
        let next = pack(key, word);
        loop {
            // The free slot of the bucket with the most free slots (two-choice balancing),
            // and the least recently used record that is not limited.
            let mut free: Option<(&AtomicU128, u128, usize)> = None;
            let mut victim: Option<(&AtomicU128, u128, u64)> = None;
            for bucket in self.buckets_made(hash).into_iter().flatten() {
                let mut first_free = None;
                let mut frees = 0;
                for slot in &bucket.0 {
                    let seen = slot.load(Ordering::Acquire);
                    let (_, word) = unpack(seen);
                    let expires_ns = self.meter.expires_ns(word);
                    if expires_ns <= now_ns {
                        frees += 1;
                        first_free = first_free.or(Some((slot, seen)));
                    } else if victim.is_none_or(|(_, _, oldest)| expires_ns < oldest)
                        && meter.allows_one_more(word, now_ns)
                    {
                        victim = Some((slot, seen, expires_ns));
                    }
                }
                if let Some((slot, seen)) = first_free {
                    if free.is_none_or(|(_, _, most)| frees > most) {
                        free = Some((slot, seen, frees));
                    }
                }
            }
            // Evict only when the table holds what it is sized for; before that a key
            // whose two buckets are full goes to the general path.
            let full = self.held.load(Ordering::Relaxed) >= self.records;
            let (slot, seen, evicting) = match (free, victim) {
                (Some((slot, seen, _)), _) => (slot, seen, false),
                (None, Some((slot, seen, _))) if full => (slot, seen, true),
                _ => return Claimed::Full,
            };
            if slot
                .compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                if evicting {
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                } else if unpack(seen).1 == 0 {
                    self.held.fetch_add(1, Ordering::Relaxed);
                }
                return Claimed::Decided(decision);
            }
            // Another key took it, or its record changed: choose again.
        }
    }

    /// Live records (expiring after `now_ns`).
    fn live(&self, now_ns: u64) -> usize {
        self.slots()
            .filter(|(_, word)| self.meter.expires_ns(*word) > now_ns)
            .count()
    }

    /// Records held (not vacated; some may have expired and not been swept).
    fn occupied(&self) -> usize {
        self.slots().filter(|(_, word)| *word != 0).count()
    }

    /// Vacates every expired slot. Returns how many.
    fn sweep(&self, now_ns: u64) -> usize {
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

    fn slots(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.made()
            .flat_map(|b| &b.0)
            .map(|s| unpack(s.load(Ordering::Acquire)))
    }

    /// Bytes the table takes: its chunks made so far, and the chunks' index.
    fn bytes(&self) -> usize {
        let made = self.chunks.iter().filter(|c| c.get().is_some()).count();
        made * std::mem::size_of::<Chunk>() + std::mem::size_of_val(&*self.chunks)
    }
}

/// The tables of a store, one per scope (rule), made at a scope's first check.
pub(super) struct Tables {
    scopes: [AtomicU64; MAX_TABLES],
    tables: [OnceLock<Table>; MAX_TABLES],
    /// Serialises making a table.
    making: Mutex<()>,
    /// Records each table is sized for.
    records: usize,
}

impl Tables {
    pub(super) fn new(records: usize) -> Self {
        Self {
            scopes: Default::default(),
            tables: Default::default(),
            making: Mutex::new(()),
            records,
        }
    }

    /// The scope's table, if it has one.
    #[inline(always)]
    pub(super) fn find(&self, scope: u64) -> Option<&Table> {
        for (table, s) in self.tables.iter().zip(&self.scopes) {
            let table = table.get()?;
            if s.load(Ordering::Relaxed) == scope {
                return Some(table);
            }
        }
        None
    }

    /// The scope's table, made (for `meter`) if there is room for one more; none when the
    /// scope's table reads its words under another meter.
    #[inline(always)]
    pub(super) fn table(&self, scope: u64, meter: &WordMeter) -> Option<&Table> {
        self.find(scope)
            .or_else(|| self.make(scope, meter))
            .filter(|t| t.meter.reads_alike(meter))
    }

    #[cold]
    fn make(&self, scope: u64, meter: &WordMeter) -> Option<&Table> {
        let _making = self.making.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(table) = self.find(scope) {
            return Some(table);
        }
        let i = self.tables.iter().position(|t| t.get().is_none())?;
        // The scope is written before the table is published (OnceLock releases it).
        self.scopes[i].store(scope, Ordering::Relaxed);
        Some(self.tables[i].get_or_init(|| Table::new(self.records, *meter)))
    }

    fn each(&self) -> impl Iterator<Item = &Table> {
        self.tables.iter().map_while(OnceLock::get)
    }

    pub(super) fn live(&self, now_ns: u64) -> usize {
        self.each().map(|t| t.live(now_ns)).sum()
    }

    pub(super) fn held(&self) -> usize {
        self.each().map(Table::occupied).sum()
    }

    pub(super) fn sweep(&self, now_ns: u64) -> usize {
        self.each().map(|t| t.sweep(now_ns)).sum()
    }

    pub(super) fn evictions(&self) -> u64 {
        self.each()
            .map(|t| t.evictions.load(Ordering::Relaxed))
            .sum()
    }

    pub(super) fn bytes(&self) -> usize {
        self.each().map(Table::bytes).sum()
    }

    /// The records the tables made so far are sized for.
    pub(super) fn sized_for(&self) -> usize {
        self.each().map(|t| t.records).sum()
    }

    /// Every record held, as (scope, the table's meter, key, word): what a state snapshot
    /// reads (`snapshot.rs`).
    pub(super) fn records(&self) -> impl Iterator<Item = (u64, &WordMeter, u64, u64)> + '_ {
        let scoped = self.scopes.iter().zip(&self.tables);
        scoped
            .map_while(|(scope, table)| Some((scope.load(Ordering::Relaxed), table.get()?)))
            .flat_map(|(scope, table)| {
                let held = table.slots().filter(|(_, word)| *word != 0);
                held.map(move |(key, word)| (scope, &table.meter, key, word))
            })
    }
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tables")
            .field("tables", &self.each().count())
            .field("records_each", &self.records)
            .finish()
    }
}
