//! The memory store's general path: one shard's table of full [`Record`]s, for every
//! algorithm, key length and operation (the lock-free path in `compact.rs` holds only GCRA
//! checks of 8-byte keys). A shard is a mutex over this table, held for one pure step.
//!
//! - **Identity.** A record is found by its (scope, key), compared in full: two keys whose
//!   hashes collide never share a record.
//! - **Bounded.** At most the shard's capacity; one rule at most its share of it (a scope
//!   given a share of its own, as the limit overrides are, at most that, whatever the
//!   parameters of its rules). A full shard sweeps
//!   expired records, then evicts one that is not limited (CLOCK, least recently used
//!   first; a record used since the hand last passed gets a second chance), taking room
//!   from the rules holding the most records first, and from every rule before it gives
//!   up. Limited, blocked or locked-out records, concurrency leases and queued delays are
//!   never evicted. When nothing may go, the new key is refused with [`StoreError::Full`].
//! - **Never full while something may go.** A rule's CLOCK queue holds the records that
//!   were evictable when last used (a record that turns limited leaves it when the hand
//!   meets it, and comes back when a use makes it evictable again), and an eviction goes
//!   round it until it finds one, giving a used record its second chance: it gives up only
//!   when no record of the rule may go. The work is bounded in total, not per call: each
//!   slot the hand passes was put there by an insert or a use, once.

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use hashbrown::HashTable;

use crate::error::StoreError;
use crate::key::Key;
use crate::state::{Record, State};
use crate::step::Outcome;

/// What bounds a shard, and the store-wide counts of what was done to stay within it.
#[derive(Debug)]
pub(super) struct Limits {
    pub(super) per_shard_capacity: usize,
    /// The most records one rule may hold in one shard.
    pub(super) per_shard_rule_cap: usize,
    /// Scopes given a share of their own
    /// ([`MemoryStoreBuilder::scope_share`](super::MemoryStoreBuilder::scope_share)).
    pub(super) scope_shares: Vec<ScopeShare>,
    /// The store's capacity (for the error).
    pub(super) capacity: usize,
    pub(super) evictions: AtomicU64,
    pub(super) refusals: AtomicU64,
}

impl Limits {
    /// The most records the share `rule` may hold in one shard.
    fn cap(&self, rule: u64) -> usize {
        self.scope_shares
            .iter()
            .find(|s| s.key == rule)
            .map_or(self.per_shard_rule_cap, |s| s.per_shard_cap)
    }

    /// Counts a refused new key and says why.
    fn refused(&self) -> StoreError {
        self.refusals.fetch_add(1, Ordering::Relaxed);
        StoreError::Full {
            capacity: self.capacity,
        }
    }
}

/// A scope whose records, whatever their rules' parameters, count under one share of their
/// own instead of one share per rule (the limit overrides': every request may name other
/// parameters, and each set would otherwise take a rule's whole share).
#[derive(Debug, Clone, Copy)]
pub(super) struct ScopeShare {
    /// The scope ([`Rule::scope`](crate::Rule::scope)).
    pub(super) scope: u64,
    /// Its share key (what [`Entry::rule`] holds for its records).
    pub(super) key: u64,
    /// The most records it may hold in one shard.
    pub(super) per_shard_cap: usize,
}

/// One key's record and what eviction needs to know of it.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) hash: u64,
    pub(super) scope: u64,
    pub(super) key: Key,
    pub(super) record: Record,
    /// The share of the rule that last used it: its parameters' hash, or its scope's share
    /// key ([`ScopeShare`]).
    pub(super) rule: u64,
    /// Not limited, blocked or locked out: eviction would cost at most one fresh window.
    pub(super) evictable: bool,
    /// Used since the CLOCK hand last passed (a second chance).
    pub(super) referenced: bool,
    /// In its rule's CLOCK queue: set when it enters the queue (new and evictable, or made
    /// evictable again by a use), cleared when the hand finds it no longer evictable.
    pub(super) queued: bool,
}

impl Entry {
    fn is(&self, hash: u64, scope: u64, key: &Key) -> bool {
        self.hash == hash && self.scope == scope && self.key == *key
    }
}

/// One rule's records in a shard.
#[derive(Debug, Default)]
struct Share {
    held: usize,
    /// The CLOCK queue: the hashes of the rule's queued records, in the order they came
    /// (or last had their second chance); may hold hashes since removed or moved to
    /// another rule (skipped when met, compacted when the queue grows past twice `held`).
    queue: VecDeque<u64>,
}

/// Whether a record may be evicted after an operation that answered `outcome`: only a key
/// that a check now would still allow, with no block or strikes, and whose state eviction
/// could not misrepresent (concurrency leases and queued delays are never dropped).
pub(super) fn evictable(record: &Record, outcome: &Outcome) -> bool {
    let plain_state = !matches!(record.state, State::Concurrency(_) | State::LeakyQueue(_));
    let allowing = match outcome {
        Outcome::Decision(d) => d.allowed && d.remaining > 0,
        Outcome::Usage(u) => u.remaining > 0,
        Outcome::Released(_) | Outcome::Done => false,
    };
    plain_state && allowing && record.guard.is_none()
}

/// A shard's table.
#[derive(Debug, Default)]
pub(super) struct Table {
    records: HashTable<Entry>,
    /// No record in the table expires before this instant, so a sweep before it is useless.
    next_expiry_ns: u64,
    /// Per share (a rule's parameters' hash, or a [`ScopeShare`]'s key): how many records
    /// it holds, and its CLOCK queue.
    rules: HashMap<u64, Share, PreHashed>,
}

impl Table {
    /// The record of (scope, key), if held.
    pub(super) fn get_mut(&mut self, hash: u64, scope: u64, key: &Key) -> Option<&mut Entry> {
        self.records.find_mut(hash, |e| e.is(hash, scope, key))
    }

    /// The record of (scope, key), if held.
    pub(super) fn get(&self, hash: u64, scope: u64, key: &Key) -> Option<&Entry> {
        self.records.find(hash, |e| e.is(hash, scope, key))
    }

    pub(super) fn len(&self) -> usize {
        self.records.len()
    }

    /// Every record held, in no order (a state snapshot reads them: `snapshot.rs`).
    pub(super) fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.records.iter()
    }

    /// Counts a record under `rule` (a new record, or one another rule used last).
    fn enlist(&mut self, rule: u64) {
        self.rules.entry(rule).or_default().held += 1;
    }

    /// Puts the entry `hash` (of `rule`, just marked queued) at the back of its rule's CLOCK
    /// queue, dropping the queue's stale slots when they outnumber the records.
    fn enqueue(&mut self, hash: u64, rule: u64) {
        let share = self.rules.entry(rule).or_default();
        share.queue.push_back(hash);
        if share.queue.len() > 2 * share.held + 16 {
            let records = &self.records;
            share.queue.retain(|&h| {
                records
                    .find(h, |e| e.hash == h && e.rule == rule && e.queued)
                    .is_some()
            });
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

    /// Removes the record of (scope, key).
    pub(super) fn remove(&mut self, hash: u64, scope: u64, key: &Key) {
        if let Ok(found) = self.records.find_entry(hash, |e| e.is(hash, scope, key)) {
            let (entry, _) = found.remove();
            self.delist(entry.rule);
        }
    }

    /// Updates a held record after an operation under `rule`.
    pub(super) fn touched(
        &mut self,
        hash: u64,
        scope: u64,
        key: &Key,
        rule: u64,
        outcome: &Outcome,
    ) {
        let Some(entry) = self.get_mut(hash, scope, key) else {
            return;
        };
        entry.evictable = evictable(&entry.record, outcome);
        let expires_ns = entry.record.expires_ns;
        self.refresh(hash, scope, key, rule);
        self.next_expiry_ns = self.next_expiry_ns.min(expires_ns);
    }

    /// After a held entry was used under `rule` (its `evictable` already set): marks it
    /// used, moves it to `rule`'s share if another rule used it last, and queues it if it
    /// is evictable and not queued.
    fn refresh(&mut self, hash: u64, scope: u64, key: &Key, rule: u64) {
        let Some(entry) = self.get_mut(hash, scope, key) else {
            return;
        };
        entry.referenced = true;
        let before = entry.rule;
        if before != rule {
            // Its slot in the old rule's queue is stale from now on (skipped when met).
            entry.rule = rule;
            entry.queued = false;
        }
        let enqueue = entry.evictable && !entry.queued;
        entry.queued |= enqueue;
        if before != rule {
            self.delist(before);
            self.enlist(rule);
        }
        if enqueue {
            self.enqueue(hash, rule);
        }
    }

    /// Stores a record the step left live: a new one, or the new value of a held one.
    /// Makes room by sweeping expired records, then by evicting an unlimited one (see the
    /// module docs); else [`StoreError::Full`]. A record `moved` from the lock-free path
    /// is not a new key: it is stored whatever the room (dropping it would forget usage).
    pub(super) fn put(
        &mut self,
        entry: Entry,
        now_ns: u64,
        limits: &Limits,
        moved: bool,
    ) -> Result<(), StoreError> {
        let (hash, scope) = (entry.hash, entry.scope);
        if !entry.record.is_live(now_ns) {
            self.remove(hash, scope, &entry.key);
            return Ok(());
        }
        if let Some(held) = self.get_mut(hash, scope, &entry.key) {
            // check_all writes back a key it read: keep its place and counts.
            let expires_ns = entry.record.expires_ns;
            held.record = entry.record;
            held.evictable = entry.evictable;
            self.next_expiry_ns = self.next_expiry_ns.min(expires_ns);
            self.refresh(hash, scope, &entry.key, entry.rule);
            return Ok(());
        }
        let rule = entry.rule;
        if !moved {
            // No room is made for a moved record: it was already held (lock-free).
            self.make_room(rule, now_ns, limits)?;
        }
        self.next_expiry_ns = self.next_expiry_ns.min(entry.record.expires_ns);
        let queued = entry.evictable;
        self.records
            .insert_unique(hash, Entry { queued, ..entry }, |e| e.hash);
        self.enlist(rule);
        if queued {
            self.enqueue(hash, rule);
        }
        Ok(())
    }

    /// Room for one more record of `rule`: sweeps, then evicts (within the rule's share
    /// when it is full, else from the largest rules first, every rule if need be);
    /// [`StoreError::Full`] only if no record may go.
    fn make_room(&mut self, rule: u64, now_ns: u64, limits: &Limits) -> Result<(), StoreError> {
        let cap = limits.cap(rule);
        if self.rules.get(&rule).map_or(0, |s| s.held) >= cap {
            self.sweep(now_ns);
        }
        if self.rules.get(&rule).map_or(0, |s| s.held) >= cap {
            // Over its share: the rule makes room among its own records only.
            if !self.evict_from(rule, limits) {
                return Err(limits.refused());
            }
        } else if self.records.len() >= limits.per_shard_capacity {
            self.sweep(now_ns);
            if self.records.len() >= limits.per_shard_capacity {
                // Room comes from the rules holding the most records first. A rule that
                // gives none has emptied its queue doing so: asking it again costs nothing
                // until one of its records is evictable again.
                let mut by_size: Vec<(usize, u64)> =
                    self.rules.iter().map(|(r, s)| (s.held, *r)).collect();
                by_size.sort_unstable_by(|a, b| b.cmp(a));
                let freed = by_size
                    .into_iter()
                    .any(|(_, victim)| self.evict_from(victim, limits));
                if !freed {
                    return Err(limits.refused());
                }
            }
        }
        Ok(())
    }

    /// Evicts `rule`'s least recently used unlimited record (CLOCK): the hand goes round the
    /// rule's queue, dropping slots of records gone or no longer evictable and giving a
    /// used record its second chance, until a record goes; `false` only when none may go
    /// (the queue is then empty). Each record is passed at most twice in one call.
    fn evict_from(&mut self, rule: u64, limits: &Limits) -> bool {
        let Some(share) = self.rules.get_mut(&rule) else {
            return false;
        };
        while let Some(hash) = share.queue.pop_front() {
            // A queued record of this rule with that hash (hashes rarely collide; if they
            // do, each queued one has a slot of its own, and any is as good a candidate).
            let Ok(mut found) = self
                .records
                .find_entry(hash, |e| e.hash == hash && e.rule == rule && e.queued)
            else {
                continue; // stale: removed, or used by another rule since
            };
            let entry = found.get_mut();
            if !entry.evictable {
                // Limited since it was queued: out of the queue until a use frees it.
                entry.queued = false;
                continue;
            }
            if entry.referenced {
                entry.referenced = false;
                share.queue.push_back(hash);
                continue;
            }
            found.remove();
            share.held = share.held.saturating_sub(1);
            limits.evictions.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Drops every record equivalent to fresh. Returns how many went.
    pub(super) fn sweep(&mut self, now_ns: u64) -> usize {
        if now_ns < self.next_expiry_ns {
            return 0;
        }
        let before = self.records.len();
        let mut next = u64::MAX;
        let mut gone: Vec<u64> = Vec::new();
        self.records.retain(|e| {
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

/// Keys are hashed once (with a per-store random seed); the maps use that hash as is.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct PreHashed;

impl BuildHasher for PreHashed {
    type Hasher = PreHashedHasher;
    fn build_hasher(&self) -> PreHashedHasher {
        PreHashedHasher(0)
    }
}

#[derive(Debug)]
pub(super) struct PreHashedHasher(u64);

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
