//! The embedded in-memory store: the default, and the fastest way to a decision. Records live
//! in a fixed number of shards, each a mutex over a hash map keyed by a 64-bit keyed hash of
//! the key. A decision locks one shard for the length of one pure step (tens of
//! nanoseconds), never across an await.
//!
//! Memory is bounded: at most `capacity` records, whatever keys clients send. Records expire
//! when equivalent to fresh and are swept when a shard fills up (or by
//! [`MemoryStore::sweep`]). When a shard is still full, a new key **evicts** a record that
//! is not limited, least recently used first (a CLOCK queue per rule: a record used since
//! the hand last passed gets a second chance), so a flood of one-off keys cannot lock new
//! clients out. What eviction costs: a key that was evicted starts fresh, so it may get at
//! most one fresh window (its full allowance once more); it was not limited, so nobody who
//! was being held back is let go.
//!
//! - A limited, blocked or locked-out key (a check now would be denied, or it carries a
//!   block or lockout strikes), a concurrency or queue record, is **never** evicted:
//!   eviction would hand an attacker a fresh bucket.
//! - **Per-rule shares.** One rule may hold at most [`rule_share`](MemoryStoreBuilder::rule_share)
//!   percent of the capacity (default 50 %); past it, its new keys evict only its own
//!   records. A full store makes room from the rule holding the most records. So one
//!   rule's flood cannot take another rule's capacity. A rule is told apart by its
//!   parameters (two rules with identical parameters share one share).
//! - When no record may be evicted, **new keys fail closed** with [`StoreError::Full`]
//!   (existing keys keep working) until some expire; [`MemoryStore::stats`] counts both
//!   evictions and refusals.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
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
/// The default share of the capacity one rule may hold, in percent.
const DEFAULT_RULE_SHARE: u8 = 50;
/// How many queue slots one eviction looks at before giving up (bounded work under a lock).
const EVICTION_SCAN: usize = 256;
/// How many rules a full shard tries to take a record from (the largest first).
const EVICTION_RULES: usize = 4;
/// Shards hold at least this many keys each (fewer shards for a small capacity), so that
/// per-rule shares and eviction have room to work.
const MIN_KEYS_PER_SHARD: usize = 64;

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
    /// The most records one rule may hold in one shard.
    per_shard_rule_cap: usize,
    capacity: usize,
    hasher: foldhash::quality::RandomState,
    evictions: AtomicU64,
    refusals: AtomicU64,
}

/// What the store did to stay within its capacity, since it was built.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct MemoryStats {
    /// Records held now.
    pub len: usize,
    /// The capacity in records.
    pub capacity: usize,
    /// Records that were not limited, evicted to make room for new keys.
    pub evictions: u64,
    /// New keys refused with [`StoreError::Full`]: no record could be evicted.
    pub refusals: u64,
}

/// One shard, on its own cache lines so two cores working on two shards do not contend.
#[derive(Debug)]
#[repr(align(128))]
struct Shard(Mutex<Table>);

#[derive(Debug, Default)]
struct Table {
    records: HashMap<u64, Entry, PreHashed>,
    /// No record in the table expires before this instant, so a sweep before it is useless.
    next_expiry_ns: u64,
    /// Per rule (its parameters' hash): how many records it holds, and its CLOCK queue.
    rules: HashMap<u64, Share, PreHashed>,
}

/// One key's record and what eviction needs to know of it.
#[derive(Debug)]
struct Entry {
    record: Record,
    /// The hash of the rule that last used it.
    rule: u64,
    /// Not limited, blocked or locked out: eviction would cost at most one fresh window.
    evictable: bool,
    /// Used since the CLOCK hand last passed (a second chance).
    referenced: bool,
}

/// One rule's records in a shard.
#[derive(Debug, Default)]
struct Share {
    held: usize,
    /// The rule's keys in the order they came; may hold keys since removed or moved to
    /// another rule (skipped when met, compacted when the queue grows past twice `held`).
    queue: VecDeque<u64>,
}

/// Counts a refused new key and says why.
fn refused(inner: &Inner) -> StoreError {
    inner.refusals.fetch_add(1, Ordering::Relaxed);
    StoreError::Full {
        capacity: inner.capacity,
    }
}

/// Whether a record may be evicted after an operation that answered `outcome`: only a key
/// that a check now would still allow, with no block or strikes, and whose state eviction
/// could not misrepresent (concurrency leases and queued delays are never dropped).
fn evictable(record: &Record, outcome: &Outcome) -> bool {
    let plain_state = !matches!(
        record.state,
        crate::state::State::Concurrency(_) | crate::state::State::LeakyQueue(_)
    );
    let allowing = match outcome {
        Outcome::Decision(d) => d.allowed && d.remaining > 0,
        Outcome::Usage(u) => u.remaining > 0,
        Outcome::Released(_) | Outcome::Done => false,
    };
    plain_state && allowing && record.guard.is_none()
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
    rule_share: u8,
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
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..shards).map(|_| Shard(Mutex::default())).collect(),
                shard_mask: u64::try_from(shards - 1).unwrap_or(0),
                per_shard_capacity,
                per_shard_rule_cap,
                capacity: self.capacity,
                hasher: foldhash::quality::RandomState::default(),
                evictions: AtomicU64::new(0),
                refusals: AtomicU64::new(0),
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

    /// Which share a rule's records count under (its parameters).
    #[inline]
    fn rule_hash(&self, rule: &Rule) -> u64 {
        self.hasher.hash_one(rule)
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
    /// Counts `hash` under `rule` (a new record, or one another rule used last).
    fn enlist(&mut self, hash: u64, rule: u64) {
        let share = self.rules.entry(rule).or_default();
        share.held += 1;
        share.queue.push_back(hash);
        if share.queue.len() > 2 * share.held + 16 {
            let records = &self.records;
            share
                .queue
                .retain(|h| records.get(h).is_some_and(|e| e.rule == rule));
        }
    }

    /// Uncounts a record of `rule` that left (removed, or now used by another rule).
    fn delist(&mut self, rule: u64) {
        if let Some(share) = self.rules.get_mut(&rule) {
            share.held = share.held.saturating_sub(1);
            if share.held == 0 {
                self.rules.remove(&rule);
            }
        }
    }

    /// Removes a record.
    fn remove(&mut self, hash: u64) {
        if let Some(entry) = self.records.remove(&hash) {
            self.delist(entry.rule);
        }
    }

    /// Updates a held record after an operation.
    fn touched(&mut self, hash: u64, rule: u64, outcome: &Outcome) {
        let Some(entry) = self.records.get_mut(&hash) else {
            return;
        };
        entry.evictable = evictable(&entry.record, outcome);
        entry.referenced = true;
        let before = entry.rule;
        if before != rule {
            entry.rule = rule;
            self.delist(before);
            self.enlist(hash, rule);
        }
    }

    /// Stores a new record the step left live. Makes room by sweeping expired records, then
    /// by evicting an unlimited one (see the module docs); else [`StoreError::Full`].
    fn put(
        &mut self,
        hash: u64,
        entry: Entry,
        now_ns: u64,
        inner: &Inner,
    ) -> Result<(), StoreError> {
        if !entry.record.is_live(now_ns) {
            self.remove(hash);
            return Ok(());
        }
        if let Some(held) = self.records.get_mut(&hash) {
            // check_all writes back a key it read: keep its place and counts.
            let rule = entry.rule;
            let evictable = entry.evictable;
            held.record = entry.record;
            held.evictable = evictable;
            held.referenced = true;
            let before = held.rule;
            if before != rule {
                held.rule = rule;
                self.delist(before);
                self.enlist(hash, rule);
            }
            return Ok(());
        }
        let rule = entry.rule;
        let own = self.rules.get(&rule).map_or(0, |s| s.held);
        if own >= inner.per_shard_rule_cap {
            self.sweep(now_ns);
        }
        if self.rules.get(&rule).map_or(0, |s| s.held) >= inner.per_shard_rule_cap {
            // Over its share: the rule makes room among its own records only.
            if !self.evict_from(rule, inner) {
                return Err(refused(inner));
            }
        } else if self.records.len() >= inner.per_shard_capacity {
            self.sweep(now_ns);
            if self.records.len() >= inner.per_shard_capacity {
                // Room comes from the rules holding the most records first.
                let mut by_size: Vec<(usize, u64)> =
                    self.rules.iter().map(|(r, s)| (s.held, *r)).collect();
                by_size.sort_unstable_by(|a, b| b.cmp(a));
                let freed = by_size
                    .into_iter()
                    .take(EVICTION_RULES)
                    .any(|(_, victim)| self.evict_from(victim, inner));
                if !freed {
                    return Err(refused(inner));
                }
            }
        }
        self.next_expiry_ns = self.next_expiry_ns.min(entry.record.expires_ns);
        self.records.insert(hash, entry);
        self.enlist(hash, rule);
        Ok(())
    }

    /// Evicts `rule`'s least recently used unlimited record (CLOCK), looking at no more
    /// than [`EVICTION_SCAN`] queue slots; `false` if none may go.
    fn evict_from(&mut self, rule: u64, inner: &Inner) -> bool {
        let Some(share) = self.rules.get_mut(&rule) else {
            return false;
        };
        let slots = share.queue.len().min(EVICTION_SCAN);
        for _ in 0..slots {
            let Some(hash) = share.queue.pop_front() else {
                break;
            };
            let Some(entry) = self.records.get_mut(&hash).filter(|e| e.rule == rule) else {
                continue; // stale: removed, or used by another rule since
            };
            if !entry.evictable || entry.referenced {
                entry.referenced = false;
                share.queue.push_back(hash);
                continue;
            }
            self.records.remove(&hash);
            share.held = share.held.saturating_sub(1);
            inner.evictions.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Drops every record equivalent to fresh. Returns how many went.
    fn sweep(&mut self, now_ns: u64) -> usize {
        if now_ns < self.next_expiry_ns {
            return 0;
        }
        let before = self.records.len();
        let mut next = u64::MAX;
        let mut gone: Vec<u64> = Vec::new();
        self.records.retain(|_, e| {
            let live = e.record.is_live(now_ns);
            if live {
                next = next.min(e.record.expires_ns);
            } else {
                gone.push(e.rule);
            }
            live
        });
        for rule in gone {
            self.delist(rule);
        }
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
            rule_share: DEFAULT_RULE_SHARE,
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
        let rule_hash = inner.rule_hash(rule);
        let mut table = inner.lock(inner.shard_index(hash));
        if let Some(entry) = table.records.get_mut(&hash) {
            let record = &mut entry.record;
            let held_live = record.is_live(now_ns);
            let outcome = apply(rule, record, &op, now_ns)?;
            if op.keeps(held_live, record, now_ns) {
                table.touched(hash, rule_hash, &outcome);
            } else {
                table.remove(hash);
            }
            return Ok(outcome);
        }
        let mut record = Record::fresh(rule, now_ns);
        let outcome = apply(rule, &mut record, &op, now_ns)?;
        if !op.creates_record() {
            return Ok(outcome);
        }
        let entry = Entry {
            evictable: evictable(&record, &outcome),
            record,
            rule: rule_hash,
            referenced: false,
        };
        table.put(hash, entry, now_ns, inner)?;
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

        let mut work: Vec<(u64, Record, u64)> = Vec::with_capacity(limits.len());
        // For each limit, the index of its key's working copy (a key may repeat).
        let mut slots = Vec::with_capacity(limits.len());
        let mut each = Vec::with_capacity(limits.len());
        for ((_, rule), &hash) in limits.iter().zip(&hashes) {
            let slot = match work.iter().position(|(h, _, _)| *h == hash) {
                Some(slot) => slot,
                None => {
                    let copy = table_of(&mut tables, hash)
                        .and_then(|t| tables[t].1.records.get(&hash).map(|e| e.record.clone()))
                        .filter(|r| r.is_live(now_ns))
                        .unwrap_or_else(|| Record::fresh(rule, now_ns));
                    work.push((hash, copy, inner.rule_hash(rule)));
                    work.len() - 1
                }
            };
            slots.push(slot);
            each.push(check_now(rule, &mut work[slot].1, cost, now_ns)?);
        }
        let allowed = each.iter().all(|d| d.allowed);
        for (slot, (hash, record, rule_hash)) in work.into_iter().enumerate() {
            let mut outcomes = slots.iter().zip(&each).filter(|(s, _)| **s == slot);
            let denied_here = outcomes.clone().any(|(_, d)| !d.allowed);
            let entry_evictable = outcomes.all(|(_, d)| evictable(&record, &Outcome::Decision(*d)));
            // A peek writes nothing; otherwise all when allowed, and denials for lockouts.
            if cost > 0 && (allowed || denied_here) {
                if let Some(t) = table_of(&mut tables, hash) {
                    let entry = Entry {
                        record,
                        rule: rule_hash,
                        evictable: entry_evictable,
                        referenced: true,
                    };
                    tables[t].1.put(hash, entry, now_ns, inner)?;
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

    /// Records held, capacity, and what was evicted or refused to stay within it.
    pub fn stats(&self) -> MemoryStats {
        MemoryStats {
            len: self.len(),
            capacity: self.inner.capacity,
            evictions: self.inner.evictions.load(Ordering::Relaxed),
            refusals: self.inner.refusals.load(Ordering::Relaxed),
        }
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
        let store = MemoryStore::builder()
            .capacity(4)
            .shards(1)
            .rule_share(100)
            .build();
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

    #[test]
    fn one_rules_flood_of_limited_keys_leaves_the_other_rules_capacity() {
        let store = MemoryStore::builder().capacity(100).shards(1).build();
        // limit 1: every flood key is limited after its one request, so none may go.
        let strict = Rule::fixed_window(1, Duration::from_secs(3600)).unwrap();
        let other = Rule::fixed_window(10, Duration::from_secs(3600)).unwrap();
        let mut refused = 0;
        for i in 0..1000u64 {
            match check(&store, &Key::from(i), &strict, SEC) {
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
