//! The embedded in-memory store: the default, and the fastest way to a decision. Records live
//! in a fixed number of shards, each a mutex over a hash map keyed by a 64-bit keyed hash of
//! the key. A decision locks one shard for the length of one pure step (tens of
//! nanoseconds), never across an await.
//!
//! Memory is bounded: at most `capacity` records. Records expire when equivalent to fresh
//! and are swept when a shard fills up (or by [`MemoryStore::sweep`]). A limited, blocked or
//! locked-out key is never evicted, because eviction would hand an attacker a fresh bucket;
//! when a shard holds only such keys, **new keys fail closed** with [`StoreError::Full`]
//! (existing keys keep working) until some expire.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::error::{CheckError, StoreError};
use crate::key::Key;
use crate::rule::Rule;
use crate::state::Record;
use crate::step::{apply, check_now, Op, Outcome};

use super::{Decisions, Store};

/// The default capacity in keys.
const DEFAULT_CAPACITY: usize = 1 << 20;
/// The default number of shards (a power of two).
const DEFAULT_SHARDS: usize = 64;
/// Shard index bits are taken from here: above the bits the maps use for their buckets,
/// below the 7 top bits they use as tags.
const SHARD_SHIFT: u32 = 40;

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
    per_shard_capacity: usize,
    capacity: usize,
    hasher: foldhash::quality::RandomState,
}

/// One shard, on its own cache lines so two cores working on two shards do not contend.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<Table>);

#[derive(Debug, Default)]
struct Table {
    records: HashMap<u64, Record, PreHashed>,
    /// No record in the table expires before this instant, so a sweep before it is useless.
    next_expiry_ns: u64,
}

/// Keys are hashed once (with a per-store random seed); the maps use that hash as is.
#[derive(Debug, Clone, Copy, Default)]
struct PreHashed;

impl BuildHasher for PreHashed {
    type Hasher = PreHashedHasher;
    fn build_hasher(&self) -> PreHashedHasher {
        PreHashedHasher(0)
    }
}

#[derive(Debug)]
struct PreHashedHasher(u64);

impl Hasher for PreHashedHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Builds a [`MemoryStore`].
#[derive(Debug, Clone)]
pub struct MemoryStoreBuilder {
    capacity: usize,
    shards: usize,
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

    /// The store.
    pub fn build(self) -> MemoryStore {
        let shards = self.shards.min(self.capacity.next_power_of_two());
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..shards).map(|_| Shard(Mutex::default())).collect(),
                shard_mask: u64::try_from(shards - 1).unwrap_or(0),
                per_shard_capacity: self.capacity.div_ceil(shards),
                capacity: self.capacity,
                hasher: foldhash::quality::RandomState::default(),
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
    #[inline]
    fn hash(&self, key: &Key) -> u64 {
        self.hasher.hash_one(key.as_bytes())
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
}

impl Table {
    /// Stores a record the step left live. Makes room by sweeping expired records when full.
    fn put(
        &mut self,
        hash: u64,
        record: Record,
        now_ns: u64,
        per_shard_capacity: usize,
        capacity: usize,
    ) -> Result<(), StoreError> {
        if !record.is_live(now_ns) {
            self.records.remove(&hash);
            return Ok(());
        }
        if self.records.len() >= per_shard_capacity && !self.records.contains_key(&hash) {
            self.sweep(now_ns);
            if self.records.len() >= per_shard_capacity {
                return Err(StoreError::Full { capacity });
            }
        }
        self.next_expiry_ns = self.next_expiry_ns.min(record.expires_ns);
        self.records.insert(hash, record);
        Ok(())
    }

    /// Drops every record equivalent to fresh. Returns how many went.
    fn sweep(&mut self, now_ns: u64) -> usize {
        if now_ns < self.next_expiry_ns {
            return 0;
        }
        let before = self.records.len();
        let mut next = u64::MAX;
        self.records.retain(|_, r| {
            let live = r.is_live(now_ns);
            if live {
                next = next.min(r.expires_ns);
            }
            live
        });
        self.next_expiry_ns = next;
        before - self.records.len()
    }
}

impl MemoryStore {
    /// A builder (capacity, shards).
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            capacity: DEFAULT_CAPACITY,
            shards: DEFAULT_SHARDS,
        }
    }

    /// Applies `op` now, synchronously. [`Store::apply`] is this, wrapped in a ready future.
    #[inline]
    pub fn apply_now(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let inner = &*self.inner;
        let hash = inner.hash(key);
        let mut table = inner.lock(inner.shard_index(hash));
        if let Some(record) = table.records.get_mut(&hash) {
            let held_live = record.is_live(now_ns);
            let outcome = apply(rule, record, &op, now_ns)?;
            if !op.keeps(held_live, record, now_ns) {
                table.records.remove(&hash);
            }
            return Ok(outcome);
        }
        let mut record = Record::fresh(rule, now_ns);
        let outcome = apply(rule, &mut record, &op, now_ns)?;
        if !op.creates_record() {
            return Ok(outcome);
        }
        table.put(
            hash,
            record,
            now_ns,
            inner.per_shard_capacity,
            inner.capacity,
        )?;
        Ok(outcome)
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
        let inner = &*self.inner;
        let hashes: Vec<u64> = limits.iter().map(|(k, _)| inner.hash(k)).collect();
        let mut shard_ids: Vec<usize> = hashes.iter().map(|h| inner.shard_index(*h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        let mut tables: Vec<(usize, MutexGuard<'_, Table>)> =
            shard_ids.iter().map(|&i| (i, inner.lock(i))).collect();
        let table_of = |tables: &mut Vec<(usize, MutexGuard<'_, Table>)>, hash: u64| {
            let id = inner.shard_index(hash);
            tables.iter().position(|(i, _)| *i == id)
        };

        let mut work: Vec<(u64, Record)> = Vec::with_capacity(limits.len());
        // For each limit, the index of its key's working copy (a key may repeat).
        let mut slots = Vec::with_capacity(limits.len());
        let mut each = Vec::with_capacity(limits.len());
        for ((_, rule), &hash) in limits.iter().zip(&hashes) {
            let slot = match work.iter().position(|(h, _)| *h == hash) {
                Some(slot) => slot,
                None => {
                    let copy = table_of(&mut tables, hash)
                        .and_then(|t| tables[t].1.records.get(&hash).cloned())
                        .filter(|r| r.is_live(now_ns))
                        .unwrap_or_else(|| Record::fresh(rule, now_ns));
                    work.push((hash, copy));
                    work.len() - 1
                }
            };
            slots.push(slot);
            each.push(check_now(rule, &mut work[slot].1, cost, now_ns)?);
        }
        let allowed = each.iter().all(|d| d.allowed);
        for (slot, (hash, record)) in work.into_iter().enumerate() {
            let denied_here = slots
                .iter()
                .zip(&each)
                .any(|(s, d)| *s == slot && !d.allowed);
            // A peek writes nothing; otherwise all when allowed, and denials for lockouts.
            if cost > 0 && (allowed || denied_here) {
                if let Some(t) = table_of(&mut tables, hash) {
                    tables[t].1.put(
                        hash,
                        record,
                        now_ns,
                        inner.per_shard_capacity,
                        inner.capacity,
                    )?;
                }
            }
        }
        Ok(Decisions { allowed, each })
    }

    /// Drops every record that is equivalent to fresh. Returns how many went. Call it now
    /// and then (the server does) to return memory after a burst of one-off keys; shards
    /// also sweep themselves when they fill up.
    pub fn sweep(&self, now_ns: u64) -> usize {
        (0..self.inner.shards.len())
            .map(|i| self.inner.lock(i).sweep(now_ns))
            .sum()
    }

    /// Records held now (live or not yet swept).
    pub fn len(&self) -> usize {
        (0..self.inner.shards.len())
            .map(|i| self.inner.lock(i).records.len())
            .sum()
    }

    /// Whether no record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most records held at once.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }
}

impl Store for MemoryStore {
    fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Outcome, CheckError>> + Send {
        std::future::ready(self.apply_now(key, rule, op, now_ns))
    }

    fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Decisions, CheckError>> + Send {
        std::future::ready(self.check_all_now(limits, cost, now_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const SEC: u64 = 1_000_000_000;

    fn check(store: &MemoryStore, key: &Key, rule: &Rule, now_ns: u64) -> Result<bool, CheckError> {
        match store.apply_now(key, rule, Op::Check { cost: 1 }, now_ns)? {
            Outcome::Decision(d) => Ok(d.allowed),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn never_evicts_a_limited_key_and_fails_closed_for_new_ones() {
        let store = MemoryStore::builder().capacity(4).shards(1).build();
        let rule = Rule::fixed_window(1, Duration::from_secs(60)).unwrap();
        for i in 0..4u64 {
            assert!(check(&store, &Key::from(i), &rule, SEC).unwrap());
        }
        assert_eq!(
            check(&store, &Key::from(99), &rule, SEC),
            Err(CheckError::Store(StoreError::Full { capacity: 4 }))
        );
        // The limited keys are still limited.
        assert!(!check(&store, &Key::from(0), &rule, SEC).unwrap());
        // Once their window is over they are swept and new keys fit again.
        assert!(check(&store, &Key::from(99), &rule, 61 * SEC).unwrap());
        assert_eq!(store.len(), 1);
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
