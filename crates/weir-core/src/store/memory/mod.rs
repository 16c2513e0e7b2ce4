//! The embedded in-memory store: the default, and the fastest way to a decision. Two paths,
//! one set of records (a (scope, key) is in exactly one of them):
//!
//! - **Lock-free** (`compact.rs`): a check of an 8-byte key (`Key::from(u64)`) under a rule
//!   whose state is one word (`word.rs`: GCRA, a token bucket that starts full, a fixed
//!   window; no lockout) is one 16-byte slot, `[key | word]`, decided by compare-and-swap
//!   without a lock: a hot key does not serialise, a denial is a plain read. One table per
//!   scope (rule), up to eight, each sized for the rule's share of the capacity.
//! - **General** (`general.rs`): everything else, in shards, each a mutex over a table of
//!   full records found by their full (scope, key), held for one pure step, never across an
//!   await. An operation there on a key the lock-free table holds (a penalty, a block, an
//!   inspect, another algorithm) first moves the record over.
//!
//! Both run the same pure step (the algorithm's `Meter::check`, which `step::apply` runs),
//! so they decide as every other store does; the conformance suite, the governor
//! differential and the contention tests check it.
//!
//! Memory is bounded, whatever keys clients send: the general path holds at most
//! `capacity` records, and each lock-free table a fixed number of slots (16 bytes × 1.25 per
//! record of the rule's share, sized at the rule's first check and made a 64 KiB chunk at a
//! time as keys need them). Records expire when
//! equivalent to fresh and are swept when a shard fills up (or by [`MemoryStore::sweep`]).
//! When there is no room, a new key **evicts** a record that is not limited, least recently
//! used first, so a flood of one-off keys cannot lock new clients out. What eviction costs:
//! a key that was evicted starts fresh, so it may get at most one fresh window (its full
//! allowance once more); it was not limited, so nobody who was being held back is let go.
//!
//! - A limited, blocked or locked-out key (a check now would be denied, or it carries a
//!   block or lockout strikes), a concurrency or queue record, is **never** evicted:
//!   eviction would hand an attacker a fresh bucket.
//! - **Per-rule shares.** One rule may hold at most [`rule_share`](MemoryStoreBuilder::rule_share)
//!   percent of the capacity (default 50 %); past it, its new keys evict only its own
//!   records. A full store makes room from the rule holding the most records. So one
//!   rule's flood cannot take another rule's capacity. A rule is told apart by its
//!   parameters (two rules with identical parameters share one share), unless its scope
//!   was given a share of its own ([`scope_share`](MemoryStoreBuilder::scope_share): one
//!   share for every rule of that scope, whatever its parameters).
//! - A new key is refused only when no record may go: an eviction looks at every
//!   evictable record of a rule (the most recently used last) and at every rule.
//! - When no record may be evicted, **new keys fail closed** with [`StoreError::Full`](crate::StoreError::Full)
//!   (existing keys keep working) until some expire; [`MemoryStore::stats`] counts both
//!   evictions and refusals.

mod blocked;
mod compact;
mod general;
mod restore;
mod snapshot;
mod word;

pub use blocked::{BlockedKey, BlockedKeys};
pub use snapshot::{ImportReport, SavedRecord, SnapshotError, StateSnapshot, MAX_SNAPSHOT_BYTES};
pub(crate) use word::WordMeter;

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use crate::decision::Decision;
use crate::error::CheckError;
use crate::key::Key;
use crate::rule::Rule;
use crate::state::Record;
use crate::step::{apply, check_now, validate, Op, Outcome};

use super::{Decisions, ScopedKey, ScopedLimits, Store};
use compact::{Claimed, Found, Tables};
use general::{evictable, Entry, Limits, ScopeShare, Table};

/// The default capacity in keys.
const DEFAULT_CAPACITY: usize = 1 << 20;
/// The default number of shards (a power of two).
const DEFAULT_SHARDS: usize = 64;
/// Shard index bits are taken from here: above the bits the maps use for their buckets,
/// below the 7 top bits they use as tags.
const SHARD_SHIFT: u32 = 40;
/// The default share of the capacity one rule may hold, in percent.
const DEFAULT_RULE_SHARE: u8 = 50;
/// Shards hold at least this many keys each (fewer shards for a small capacity), so that
/// per-rule shares and eviction have room to work.
const MIN_KEYS_PER_SHARD: usize = 64;
/// The scope of records addressed without one ([`Store::apply`]: the key alone).
const UNSCOPED: u64 = 0;

/// The embedded store. Cheap to clone; clones share the records.
///
/// ```
/// use weir_core::MemoryStore;
/// let store = MemoryStore::builder().capacity(100_000).build();
/// assert_eq!(store.len(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shards: Box<[Shard]>,
    shard_mask: u64,
    limits: Limits,
    hasher: foldhash::quality::RandomState,
    compact: Tables,
    /// Every key hashes alike (a forced collision, for tests).
    #[cfg(test)]
    collide: bool,
}

/// What the store did to stay within its capacity, since it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Records held now (both paths).
    pub len: usize,
    /// The capacity in records.
    pub capacity: usize,
    /// Records that were not limited, evicted to make room for new keys.
    pub evictions: u64,
    /// New keys refused with [`StoreError::Full`](crate::StoreError::Full): no record could be evicted.
    pub refusals: u64,
    /// Bytes the lock-free tables take: the chunks of buckets made so far (a table is made
    /// a 64 KiB chunk at a time, as keys need them) and their index.
    pub lock_free_bytes: usize,
    /// Records the lock-free tables are sized for (each table, at its rule's first check:
    /// the rule's share of the capacity).
    pub lock_free_records: usize,
    /// Records a lock-free table moved from their key's first bucket to its second, to
    /// make room in a full bucket for a new key (nothing is lost or evicted by a move).
    pub lock_free_moves: u64,
}

/// One shard, on its own cache lines so two cores working on two shards do not contend.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<Table>);

/// The 8 bytes of a key the lock-free path can hold and the rule's one-word meter, if
/// `rule` and `op` are its kind: a check (or peek) under a rule whose state is one word.
#[inline]
fn lock_free(key: &Key, rule: &Rule, op: &Op<'_>) -> Option<(u64, WordMeter)> {
    if !matches!(op, Op::Check { .. }) {
        return None;
    }
    let meter = WordMeter::of(rule)?;
    let bytes: [u8; 8] = key.as_bytes().try_into().ok()?;
    Some((u64::from_le_bytes(bytes), meter))
}

/// Builds a [`MemoryStore`].
#[derive(Debug, Clone)]
pub struct MemoryStoreBuilder {
    capacity: usize,
    shards: usize,
    rule_share: u8,
    /// (scope, percent): scopes given a share of their own.
    scope_shares: Vec<(u64, u8)>,
}

impl MemoryStoreBuilder {
    /// The most keys held at once (default 1 048 576). Split evenly over the shards.
    pub fn capacity(mut self, keys: usize) -> Self {
        self.capacity = keys.max(1);
        self
    }

    /// The number of shards, rounded up to a power of two (default 64).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.clamp(1, 1 << 16).next_power_of_two();
        self
    }

    /// The most one rule may hold, in percent of the capacity (1 to 100, default 50): past
    /// it, the rule's new keys evict its own unlimited records or are refused, so a flood
    /// under one rule leaves the rest of the capacity to the others.
    pub fn rule_share(mut self, percent: u8) -> Self {
        self.rule_share = percent.clamp(1, 100);
        self
    }

    /// Gives the records of one scope (every rule named `name` shares it: see
    /// [`Rule::scope`]) a share of their own, `percent` of the capacity (1 to 100), whatever
    /// the parameters of the rules checking them. Without it, each set of parameters is a
    /// rule of its own with the [`rule_share`](Self::rule_share): a scope whose callers pick
    /// the parameters (the server's limit overrides, named alike whatever limit a request
    /// names) could then take a whole rule's share once per set. Past its share, the
    /// scope's new keys evict its own unlimited records or are refused, and nothing else's.
    /// Bounds the general path (the keys the lock-free tables hold are 8 bytes long).
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{Key, Limiter, ManualClock, MemoryStore, Rule};
    /// let scope = Rule::per_second(1)?.named("overrides").scope();
    /// let store = MemoryStore::builder().capacity(6400).scope_share(scope, 10).build();
    /// let limiter = Limiter::new(store.clone(), ManualClock::default());
    /// let mut refused = 0;
    /// for i in 0..2000u64 {
    ///     // Each request names its own limit (1 to 7 an hour), then goes over it.
    ///     let rule = Rule::fixed_window(1 + i % 7, Duration::from_secs(3600))?.named("overrides");
    ///     let key = Key::new(format!("override-{i}"))?;
    ///     for _ in 0..8 {
    ///         if limiter.check_now(&key, &rule, 1).is_err() {
    ///             refused += 1; // StoreError::Full: its share holds only limited keys
    ///             break;
    ///         }
    ///     }
    /// }
    /// assert!(store.len() <= 640, "one share of 10 %: {}", store.len());
    /// assert!(refused > 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scope_share(mut self, scope: u64, percent: u8) -> Self {
        self.scope_shares.retain(|(s, _)| *s != scope);
        self.scope_shares.push((scope, percent.clamp(1, 100)));
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStore {
        let most = (self.capacity / MIN_KEYS_PER_SHARD).max(1);
        // The largest power of two not above `most` (both are powers of two then).
        let shards = self
            .shards
            .min(1 << (usize::BITS - 1 - most.leading_zeros()));
        let per_shard_capacity = self.capacity.div_ceil(shards);
        let per_shard_rule_cap = (per_shard_capacity * usize::from(self.rule_share))
            .div_ceil(100)
            .max(1);
        let rule_records = (self.capacity * usize::from(self.rule_share)).div_ceil(100);
        let hasher = foldhash::quality::RandomState::default();
        let scope_shares = self
            .scope_shares
            .iter()
            .map(|&(scope, percent)| ScopeShare {
                scope,
                key: hasher.hash_one(("scope share", scope)),
                per_shard_cap: (per_shard_capacity * usize::from(percent))
                    .div_ceil(100)
                    .max(1),
            })
            .collect();
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..shards).map(|_| Shard(Mutex::default())).collect(),
                shard_mask: u64::try_from(shards - 1).unwrap_or(0),
                limits: Limits {
                    per_shard_capacity,
                    per_shard_rule_cap,
                    scope_shares,
                    capacity: self.capacity,
                    evictions: AtomicU64::new(0),
                    refusals: AtomicU64::new(0),
                },
                hasher,
                compact: Tables::new(rule_records),
                #[cfg(test)]
                collide: false,
            }),
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl Inner {
    /// The insert path of a check the lock-free table did not find (`word` the key's 8
    /// bytes, `meter` the rule's): under the key's stripe lock (which orders inserts of one
    /// key) the table is asked again, then, if the general table does not hold the key,
    /// a slot is claimed; the general path takes the rest (a key it holds, a peek, no slot
    /// to be had). Out of line: a key is new once, checked many times, and the checks' own
    /// path stays short.
    #[cold]
    #[inline(never)]
    fn insert(
        &self,
        table: &compact::Table,
        (hash, scope, key): (u64, u64, &Key),
        (word, meter): (u64, &WordMeter),
        rule: &Rule,
        cost: u64,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let _stripe = table.stripe(hash);
        if let Found::Decided(d) = table.check(hash, word, meter, cost, now_ns) {
            return Ok(Outcome::Decision(d));
        }
        let held = self.shard_index(hash);
        let mut shard = self.lock(held);
        if cost > 0 && shard.get(hash, scope, key).is_none() {
            // Making room moves another key's record within the table: that key's shard is
            // held meanwhile (this one is already; another is only tried, never waited
            // for, so two inserts never wait on each other).
            let exclusive = |other: u64| {
                let other_hash = self.hash_bytes(scope, &other.to_le_bytes());
                let index = self.shard_index(other_hash);
                if index == held {
                    return Some((other_hash, None));
                }
                let guard = match self.shards.get(index)?.0.try_lock() {
                    Ok(guard) => guard,
                    Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                    Err(TryLockError::WouldBlock) => return None,
                };
                Some((other_hash, Some(guard)))
            };
            if let Claimed::Decided(d) = table.claim(hash, word, (meter, cost, now_ns), exclusive) {
                return Ok(Outcome::Decision(d));
            }
        }
        let op = Op::Check { cost };
        self.apply_general(&mut shard, (hash, scope, key), rule, &op, now_ns)
    }

    /// The hash of (scope, key): both paths find the record by it.
    #[inline]
    fn hash(&self, scope: u64, key: &Key) -> u64 {
        self.hash_bytes(scope, key.as_bytes())
    }

    /// [`hash`](Self::hash) of a key's bytes (what a [`KeyedLimiter`](crate::KeyedLimiter)
    /// has, without building the [`Key`]).
    #[inline]
    fn hash_bytes(&self, scope: u64, key: &[u8]) -> u64 {
        #[cfg(test)]
        if self.collide {
            return 0x5EED;
        }
        self.hasher.hash_one((scope, key))
    }

    /// Which share a rule's records count under: its scope's own, if it was given one,
    /// else its parameters'.
    #[inline]
    fn rule_hash(&self, rule: &Rule) -> u64 {
        let scope = rule.scope();
        match self.limits.scope_shares.iter().find(|s| s.scope == scope) {
            Some(share) => share.key,
            None => self.hasher.hash_one(rule),
        }
    }

    #[inline]
    fn shard_index(&self, hash: u64) -> usize {
        usize::try_from((hash >> SHARD_SHIFT) & self.shard_mask).unwrap_or(0)
    }

    #[inline]
    fn lock(&self, index: usize) -> MutexGuard<'_, Table> {
        // A step never panics, so a poisoned lock still guards consistent records.
        match self.shards.get(index) {
            Some(shard) => shard.0.lock().unwrap_or_else(PoisonError::into_inner),
            None => self.shards[0]
                .0
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        }
    }

    /// The record the lock-free table holds for (scope, key), moved out of it (read at
    /// `now_ns`): the general path is about to hold it. Called with the key's shard locked.
    fn take_lock_free(&self, hash: u64, scope: u64, key: &Key, now_ns: u64) -> Option<Record> {
        let bytes: [u8; 8] = key.as_bytes().try_into().ok()?;
        let table = self.compact.find(scope)?;
        let word = table.take(hash, u64::from_le_bytes(bytes))?;
        Some(table.meter.record(word, now_ns))
    }

    /// The general path, with the key's shard locked.
    fn apply_general(
        &self,
        table: &mut Table,
        (hash, scope, key): (u64, u64, &Key),
        rule: &Rule,
        op: &Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let rule_hash = self.rule_hash(rule);
        if let Some(entry) = table.get_mut(hash, scope, key) {
            let record = &mut entry.record;
            let held_live = record.is_live(now_ns);
            let outcome = apply(rule, record, op, now_ns)?;
            if op.keeps(held_live, record, now_ns) {
                table.touched(hash, scope, key, rule_hash, &outcome);
            } else {
                table.remove(hash, scope, key);
            }
            return Ok(outcome);
        }
        // An operation that cannot succeed must fail before a record moves (it would be
        // lost with the error).
        validate(rule, op)?;
        let moved = self.take_lock_free(hash, scope, key, now_ns);
        let held_live = moved.as_ref().is_some_and(|r| r.is_live(now_ns));
        let mut record = moved.unwrap_or_else(|| Record::fresh(rule, now_ns));
        let outcome = apply(rule, &mut record, op, now_ns)?;
        if !op.keeps(held_live, &record, now_ns) {
            return Ok(outcome);
        }
        let entry = Entry {
            hash,
            scope,
            key: key.clone(),
            evictable: evictable(&record, &outcome),
            record,
            rule: rule_hash,
            referenced: false,
            queued: false,
            ticket: 0,
        };
        table.put(entry, now_ns, &self.limits, held_live)?;
        Ok(outcome)
    }
}

impl MemoryStore {
    /// A builder (capacity, shards).
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            capacity: DEFAULT_CAPACITY,
            shards: DEFAULT_SHARDS,
            rule_share: DEFAULT_RULE_SHARE,
            scope_shares: Vec::new(),
        }
    }

    /// Applies `op` now, synchronously, to the record of `key` alone. [`Store::apply`] is
    /// this, wrapped in a ready future.
    #[inline]
    pub fn apply_now(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        self.apply_in(UNSCOPED, key, rule, op, now_ns)
    }

    /// Applies `op` now, synchronously, to the record of (`rule`, `key`): what a
    /// [`Limiter`](crate::Limiter) asks ([`ScopedKey::scoped`]).
    #[inline]
    pub fn apply_scoped_now(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        self.apply_in(rule.scope(), key, rule, op, now_ns)
    }

    #[inline]
    fn apply_in(
        &self,
        scope: u64,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let inner = &*self.inner;
        let hash = inner.hash(scope, key);
        if let (Some((word, meter)), Op::Check { cost }) = (lock_free(key, rule, &op), op) {
            if let Some(table) = inner.compact.table(scope, &meter) {
                validate(rule, &op)?;
                if let Found::Decided(d) = table.check(hash, word, &meter, cost, now_ns) {
                    return Ok(Outcome::Decision(d));
                }
                return inner.insert(
                    table,
                    (hash, scope, key),
                    (word, &meter),
                    rule,
                    cost,
                    now_ns,
                );
            }
        }
        let mut shard = inner.lock(inner.shard_index(hash));
        inner.apply_general(&mut shard, (hash, scope, key), rule, &op, now_ns)
    }

    /// A check of `cost` (0: a peek) on the record of (`rule`, `Key::from(key)`), already
    /// validated, decided by the rule's lock-free table with `meter` (the rule's one-word
    /// meter, made once by the caller): the [`KeyedLimiter`](crate::KeyedLimiter)'s way in,
    /// without building the key, deriving the meter or validating again. `None` when the
    /// table does not hold the key (or the rule has no table): then
    /// [`apply_scoped_now`](Self::apply_scoped_now) with `Op::Check` decides, on the same
    /// record.
    #[inline(always)]
    pub(crate) fn check_lock_free_u64(
        &self,
        rule: &Rule,
        meter: &WordMeter,
        key: u64,
        cost: u64,
        now_ns: u64,
    ) -> Option<Decision> {
        let scope = rule.scope();
        let table = self.inner.compact.table(scope, meter)?;
        // `Key::from(u64)` is the number's big-endian bytes; the lock-free table holds those
        // 8 bytes read as a little-endian word (`lock_free`).
        let bytes = key.to_be_bytes();
        let hash = self.inner.hash_bytes(scope, &bytes);
        match table.check(hash, u64::from_le_bytes(bytes), meter, cost, now_ns) {
            Found::Decided(d) => Some(d),
            Found::Absent => None,
        }
    }

    /// [`Store::check_all`], synchronously: locks the shards involved in index order (so
    /// two such calls never deadlock), decides every limit on a copy, and writes back only
    /// if all allow (denials are written back too, for their lockouts).
    pub fn check_all_now(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        self.check_all_in(limits, |_| UNSCOPED, cost, now_ns)
    }

    /// [`check_all_now`](Self::check_all_now) on the records of each (rule, key): what a
    /// [`Limiter`](crate::Limiter) asks ([`ScopedLimits::scoped`]).
    pub fn check_all_scoped_now(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        self.check_all_in(limits, Rule::scope, cost, now_ns)
    }

    fn check_all_in(
        &self,
        limits: &[(Key, Rule)],
        scope_of: impl Fn(&Rule) -> u64,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        let inner = &*self.inner;
        let ids: Vec<(u64, u64)> = limits
            .iter()
            .map(|(k, r)| {
                let scope = scope_of(r);
                (inner.hash(scope, k), scope)
            })
            .collect();
        let mut shard_ids: Vec<usize> = ids.iter().map(|(h, _)| inner.shard_index(*h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        let mut tables: Vec<(usize, MutexGuard<'_, Table>)> =
            shard_ids.iter().map(|&i| (i, inner.lock(i))).collect();
        let table_of = |tables: &mut Vec<(usize, MutexGuard<'_, Table>)>, hash: u64| {
            let id = inner.shard_index(hash);
            tables.iter().position(|(i, _)| *i == id)
        };

        // Records the lock-free path held move to the general one first (whatever the
        // outcome, they stay there: a move must not lose them).
        for ((key, rule), &(hash, scope)) in limits.iter().zip(&ids) {
            let Some(t) = table_of(&mut tables, hash) else {
                continue;
            };
            if tables[t].1.get(hash, scope, key).is_none() {
                if let Some(record) = inner.take_lock_free(hash, scope, key, now_ns) {
                    let entry = Entry {
                        hash,
                        scope,
                        key: key.clone(),
                        evictable: false,
                        record,
                        rule: inner.rule_hash(rule),
                        referenced: true,
                        queued: false,
                        ticket: 0,
                    };
                    tables[t].1.put(entry, now_ns, &inner.limits, true)?;
                }
            }
        }

        // (hash, scope, key, working copy, rule hash), one per distinct record.
        let mut work: Vec<(u64, u64, &Key, Record, u64)> = Vec::with_capacity(limits.len());
        // For each limit, the index of its record's working copy (a record may repeat).
        let mut slots = Vec::with_capacity(limits.len());
        let mut each = Vec::with_capacity(limits.len());
        for ((key, rule), &(hash, scope)) in limits.iter().zip(&ids) {
            let found = work
                .iter()
                .position(|(h, s, k, _, _)| *h == hash && *s == scope && *k == key);
            let slot = match found {
                Some(slot) => slot,
                None => {
                    let copy = table_of(&mut tables, hash)
                        .and_then(|t| tables[t].1.get(hash, scope, key).map(|e| e.record.clone()))
                        .filter(|r| r.is_live(now_ns))
                        .unwrap_or_else(|| Record::fresh(rule, now_ns));
                    work.push((hash, scope, key, copy, inner.rule_hash(rule)));
                    work.len() - 1
                }
            };
            slots.push(slot);
            each.push(check_now(rule, &mut work[slot].3, cost, now_ns)?);
        }
        let allowed = each.iter().all(|d| d.allowed);
        for (slot, (hash, scope, key, record, rule_hash)) in work.into_iter().enumerate() {
            let mut outcomes = slots.iter().zip(&each).filter(|(s, _)| **s == slot);
            let denied_here = outcomes.clone().any(|(_, d)| !d.allowed);
            let entry_evictable = outcomes.all(|(_, d)| evictable(&record, &Outcome::Decision(*d)));
            // A peek writes nothing; otherwise all when allowed, and denials for lockouts.
            if cost > 0 && (allowed || denied_here) {
                if let Some(t) = table_of(&mut tables, hash) {
                    let entry = Entry {
                        hash,
                        scope,
                        key: key.clone(),
                        record,
                        rule: rule_hash,
                        evictable: entry_evictable,
                        referenced: true,
                        queued: false,
                        ticket: 0,
                    };
                    tables[t].1.put(entry, now_ns, &inner.limits, false)?;
                }
            }
        }
        Ok(Decisions { allowed, each })
    }

    /// Drops every record that is equivalent to fresh. Returns how many went. Call it now
    /// and then (the server does) to return memory after a burst of one-off keys; shards
    /// also sweep themselves when they fill up.
    pub fn sweep(&self, now_ns: u64) -> usize {
        let general: usize = (0..self.inner.shards.len())
            .map(|i| self.inner.lock(i).sweep(now_ns))
            .sum();
        general + self.inner.compact.sweep(now_ns)
    }

    /// Records held now (live or not yet swept).
    pub fn len(&self) -> usize {
        let general: usize = (0..self.inner.shards.len())
            .map(|i| self.inner.lock(i).len())
            .sum();
        general + self.inner.compact.held()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most records held at once.
    pub fn capacity(&self) -> usize {
        self.inner.limits.capacity
    }

    /// Records held, capacity, and what was evicted or refused to stay within it.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            len: self.len(),
            capacity: self.inner.limits.capacity,
            evictions: self.inner.limits.evictions.load(Ordering::Relaxed)
                + self.inner.compact.evictions(),
            refusals: self.inner.limits.refusals.load(Ordering::Relaxed),
            lock_free_bytes: self.inner.compact.bytes(),
            lock_free_records: self.inner.compact.sized_for(),
            lock_free_moves: self.inner.compact.moves(),
        }
    }

    /// Live records on the lock-free path (for tests and benches).
    #[doc(hidden)]
    pub fn lock_free_len(&self, now_ns: u64) -> usize {
        self.inner.compact.live(now_ns)
    }
}

impl Store for MemoryStore {
    fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Outcome, CheckError>> + Send {
        std::future::ready(if key.is_scoped() {
            self.apply_scoped_now(key.key(), rule, op, now_ns)
        } else {
            self.apply_now(key.key(), rule, op, now_ns)
        })
    }

    fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Decisions, CheckError>> + Send {
        std::future::ready(if limits.is_scoped() {
            self.check_all_scoped_now(limits.as_slice(), cost, now_ns)
        } else {
            self.check_all_now(limits.as_slice(), cost, now_ns)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::StoreError;
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
        let scoped =
            |rule: &Rule| match store.apply_scoped_now(key, rule, Op::Check { cost: 1 }, SEC) {
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
        // Text keys: the general path (8-byte keys would take the lock-free one).
        let key = |i: u64| Key::new(format!("key-{i}")).unwrap();
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
            // Text keys: the general path, whose shares this is about.
            let key = Key::new(format!("a-{i}")).unwrap();
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
            let key = Key::new(format!("b-{i}")).unwrap();
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
}
