//! The memory store itself and the routing of one operation: [`MemoryStore`] hashes
//! (scope, key) once, sends a check under a one-word rule to its scope's lock-free table
//! (an 8-byte key to `compact.rs`'s, a key of other length up to 48 bytes to
//! `strings.rs`'s; a key the table does not hold goes to the insert path, `insert.rs`),
//! and everything else to the key's shard of the general table (`general.rs`), locked for
//! one pure step. Here too: what the store holds and counts
//! (`len`, `stats`, `sweep`). Built by `builder.rs`; all-or-nothing checks in `check_all.rs`.

use std::hash::BuildHasher;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::decision::Decision;
use crate::error::CheckError;
use crate::key::Key;
use crate::rule::Rule;
use crate::state::Record;
use crate::step::{apply, validate, Op, Outcome};

use super::compact::{self, Found};
use super::general::{evictable, Entry, Limits, Table};
use super::strings::{self, Probe};
use super::tables::Tables;
use super::word::WordMeter;

/// Shard index bits are taken from here: above the bits the maps use for their buckets,
/// below the 7 top bits they use as tags.
const SHARD_SHIFT: u32 = 40;
/// The scope of records addressed without one (`Store::apply`: the key alone).
pub(super) const UNSCOPED: u64 = 0;

/// The embedded store. Cheap to clone; clones share the records.
///
/// ```
/// use weir_core::MemoryStore;
/// let store = MemoryStore::builder().capacity(100_000).build();
/// assert_eq!(store.len(), 0);
/// ```
#[derive(Clone, Debug)]
pub struct MemoryStore {
    pub(super) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(super) struct Inner {
    pub(super) shards: Box<[Shard]>,
    pub(super) shard_mask: u64,
    pub(super) limits: Limits,
    pub(super) hasher: foldhash::quality::RandomState,
    pub(super) compact: Tables<compact::Table>,
    /// The lock-free tables of string keys (other lengths than 8, up to 48 bytes).
    pub(super) strings: Tables<strings::Table>,
    /// Every key hashes alike (a forced collision, for tests).
    #[cfg(test)]
    pub(super) collide: bool,
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
pub(super) struct Shard(pub(super) Mutex<Table>);

/// How a lock-free table holds a key.
enum LockFree {
    /// An 8-byte key, as a word (`compact.rs`).
    Word(u64),
    /// A key of another length, up to 48 bytes (`strings.rs`).
    String(Probe),
}

/// How a lock-free table holds `key` (of hash `hash`), if it can.
#[inline]
fn lock_free_key(hash: u64, key: &Key) -> Option<LockFree> {
    let bytes = key.as_bytes();
    match <[u8; 8]>::try_from(bytes) {
        Ok(word) => Some(LockFree::Word(u64::from_le_bytes(word))),
        Err(_) => Probe::new(hash, bytes).map(LockFree::String),
    }
}

impl Inner {
    /// The hash of (scope, key): both paths find the record by it.
    #[inline]
    pub(super) fn hash(&self, scope: u64, key: &Key) -> u64 {
        self.hash_bytes(scope, key.as_bytes())
    }

    /// [`hash`](Self::hash) of a key's bytes (what a [`KeyedLimiter`](crate::KeyedLimiter)
    /// has, without building the [`Key`]).
    #[inline]
    pub(super) fn hash_bytes(&self, scope: u64, key: &[u8]) -> u64 {
        #[cfg(test)]
        if self.collide {
            return 0x5EED;
        }
        self.hasher.hash_one((scope, key))
    }

    /// Which share a rule's records count under: its scope's own, if it was given one,
    /// else its parameters'.
    #[inline]
    pub(super) fn rule_hash(&self, rule: &Rule) -> u64 {
        let scope = rule.scope();
        match self.limits.scope_shares.iter().find(|s| s.scope == scope) {
            Some(share) => share.key,
            None => self.hasher.hash_one(rule),
        }
    }

    #[inline]
    pub(super) fn shard_index(&self, hash: u64) -> usize {
        usize::try_from((hash >> SHARD_SHIFT) & self.shard_mask).unwrap_or(0)
    }

    #[inline]
    pub(super) fn lock(&self, index: usize) -> MutexGuard<'_, Table> {
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
    pub(super) fn take_lock_free(
        &self,
        hash: u64,
        scope: u64,
        key: &Key,
        now_ns: u64,
    ) -> Option<Record> {
        match lock_free_key(hash, key)? {
            LockFree::Word(word) => {
                let table = self.compact.find(scope)?;
                let word = table.take(hash, word)?;
                Some(table.meter.record(word, now_ns))
            }
            LockFree::String(probe) => {
                let table = self.strings.find(scope)?;
                let word = table.take(hash, &probe)?;
                Some(table.meter.record(word, now_ns))
            }
        }
    }

    /// Whether `scope` was given a share of its own: its string keys take the general path,
    /// which bounds the share (a lock-free table is sized for a rule's share).
    #[inline]
    fn own_share(&self, scope: u64) -> bool {
        !self.limits.scope_shares.is_empty()
            && self.limits.scope_shares.iter().any(|s| s.scope == scope)
    }

    /// A check on the lock-free path, if `key` and `rule` take it: `None` sends it to the
    /// general path.
    #[inline(always)]
    fn check_lock_free(
        &self,
        (hash, scope, key): (u64, u64, &Key),
        rule: &Rule,
        cost: u64,
        now_ns: u64,
    ) -> Option<Result<Outcome, CheckError>> {
        let meter = WordMeter::of(rule)?;
        let op = Op::Check { cost };
        match lock_free_key(hash, key)? {
            LockFree::Word(word) => {
                let table = self.compact.table(scope, &meter)?;
                if let Err(e) = validate(rule, &op) {
                    return Some(Err(e));
                }
                if let Found::Decided(d) = table.check(hash, word, &meter, cost, now_ns) {
                    return Some(Ok(Outcome::Decision(d)));
                }
                Some(self.insert(
                    table,
                    (hash, scope, key),
                    (word, &meter),
                    rule,
                    cost,
                    now_ns,
                ))
            }
            LockFree::String(probe) => {
                if self.own_share(scope) {
                    return None;
                }
                let table = self.strings.table(scope, &meter)?;
                if let Err(e) = validate(rule, &op) {
                    return Some(Err(e));
                }
                if let Found::Decided(d) = table.check(hash, &probe, &meter, cost, now_ns) {
                    return Some(Ok(Outcome::Decision(d)));
                }
                let at = (hash, scope, key);
                Some(self.insert_string(table, at, (&probe, &meter), rule, cost, now_ns))
            }
        }
    }

    /// The general path, with the key's shard locked.
    pub(super) fn apply_general(
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
    /// [`Limiter`](crate::Limiter) asks ([`ScopedKey::scoped`](crate::store::ScopedKey::scoped)).
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
        if let Op::Check { cost } = op {
            if let Some(decided) = inner.check_lock_free((hash, scope, key), rule, cost, now_ns) {
                return decided;
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

    /// Drops every record that is equivalent to fresh. Returns how many went. Call it now
    /// and then (the server does) to return memory after a burst of one-off keys; shards
    /// also sweep themselves when they fill up.
    pub fn sweep(&self, now_ns: u64) -> usize {
        let general: usize = (0..self.inner.shards.len())
            .map(|i| self.inner.lock(i).sweep(now_ns))
            .sum();
        general + self.inner.compact.sweep(now_ns) + self.inner.strings.sweep(now_ns)
    }

    /// Records held now (live or not yet swept).
    pub fn len(&self) -> usize {
        let general: usize = (0..self.inner.shards.len())
            .map(|i| self.inner.lock(i).len())
            .sum();
        general + self.inner.compact.held() + self.inner.strings.held()
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
                + self.inner.compact.evictions()
                + self.inner.strings.evictions(),
            refusals: self.inner.limits.refusals.load(Ordering::Relaxed),
            lock_free_bytes: self.inner.compact.bytes() + self.inner.strings.bytes(),
            lock_free_records: self.inner.compact.sized_for() + self.inner.strings.sized_for(),
            lock_free_moves: self.inner.compact.moves(),
        }
    }

    /// Live records on the lock-free path (for tests and benches).
    #[doc(hidden)]
    pub fn lock_free_len(&self, now_ns: u64) -> usize {
        self.inner.compact.live(now_ns) + self.inner.strings.live(now_ns)
    }
}
