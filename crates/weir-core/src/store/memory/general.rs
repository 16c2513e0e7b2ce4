//! The memory store's general path: one shard's table of full [`Record`]s, for every
//! algorithm, key length and operation (the lock-free paths in `compact.rs` and
//! `strings.rs` hold only checks under one-word rules of keys up to 48 bytes). A shard is a
//! mutex over this table, held for one pure step.
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
    /// The ticket of its slot in the queue (set when queued): a slot whose ticket is not
    /// its entry's is stale (the record was removed, or left the queue, since).
    pub(super) ticket: u32,
}

impl Entry {
    fn is(&self, hash: u64, scope: u64, key: &Key) -> bool {
        self.hash == hash && self.scope == scope && self.key == *key
    }

    /// Whether the queue slot (hash, ticket) of `rule` is this entry's live one.
    fn slot_is(&self, hash: u64, ticket: u32, rule: u64) -> bool {
        self.hash == hash && self.rule == rule && self.queued && self.ticket == ticket
    }
}

/// One rule's records in a shard.
#[derive(Debug, Default)]
struct Share {
    held: usize,
    /// The CLOCK queue: (hash, ticket) of the rule's queued records, in the order they came
    /// (or last had their second chance). Each queued record has exactly one live slot, the
    /// one with its ticket; the others are stale (a record removed, re-added, or moved to
    /// another rule since), skipped when met and dropped when the queue grows past twice
    /// `held`.
    queue: VecDeque<(u64, u32)>,
    /// The next slot's ticket.
    next_ticket: u32,
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

    /// Queues the held entry (scope, key) of `rule` at the back of the rule's CLOCK queue
    /// with a new ticket, dropping the queue's stale slots when they outnumber the records
    /// (after which the queue holds one slot per queued record).
    fn enqueue(&mut self, hash: u64, scope: u64, key: &Key, rule: u64) {
        let ticket = self.ticket(rule);
        let Some(entry) = self.records.find_mut(hash, |e| e.is(hash, scope, key)) else {
            return;
        };
        entry.queued = true;
        entry.ticket = ticket;
        self.push_slot(hash, ticket, rule);
    }

    /// A new ticket of `rule`'s queue.
    fn ticket(&mut self, rule: u64) -> u32 {
        let share = self.rules.entry(rule).or_default();
        let ticket = share.next_ticket;
        share.next_ticket = ticket.wrapping_add(1);
        ticket
    }

    /// Puts the slot (hash, ticket) at the back of `rule`'s queue (its entry already marked
    /// queued with that ticket), dropping the stale slots when they outnumber the records.
    fn push_slot(&mut self, hash: u64, ticket: u32, rule: u64) {
        let share = self.rules.entry(rule).or_default();
        share.queue.push_back((hash, ticket));
        if share.queue.len() > 2 * share.held + 16 {
            let records = &self.records;
            share
                .queue
                .retain(|&(h, t)| records.find(h, |e| e.slot_is(h, t, rule)).is_some());
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
        if before != rule {
            self.delist(before);
            self.enlist(rule);
        }
        if enqueue {
            self.enqueue(hash, scope, key, rule);
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
        let Some(entry) = self.write_back(entry) else {
            return Ok(());
        };
        let rule = entry.rule;
        if !moved {
            // No room is made for a moved record: it was already held (lock-free).
            self.make_room(rule, now_ns, limits)?;
        }
        self.next_expiry_ns = self.next_expiry_ns.min(entry.record.expires_ns);
        self.enlist(rule);
        let ticket = entry.evictable.then(|| self.ticket(rule));
        self.records.insert_unique(
            hash,
            Entry {
                queued: ticket.is_some(),
                ticket: ticket.unwrap_or(0),
                ..entry
            },
            |e| e.hash,
        );
        if let Some(ticket) = ticket {
            self.push_slot(hash, ticket, rule);
        }
        Ok(())
    }

    /// Writes `entry`'s record over the held one of its key, keeping its place and counts
    /// (check_all writes back a key it read), and gives `entry` back when none is held.
    /// One look-up when the record stays in its rule's share and queue, as it nearly
    /// always does; [`Table::refresh`] otherwise.
    fn write_back(&mut self, entry: Entry) -> Option<Entry> {
        let (hash, scope) = (entry.hash, entry.scope);
        let Some(held) = self.get_mut(hash, scope, &entry.key) else {
            return Some(entry);
        };
        let expires_ns = entry.record.expires_ns;
        held.record = entry.record;
        held.evictable = entry.evictable;
        held.referenced = true;
        let settled = held.rule == entry.rule && (held.queued || !held.evictable);
        self.next_expiry_ns = self.next_expiry_ns.min(expires_ns);
        if !settled {
            self.refresh(hash, scope, &entry.key, entry.rule);
        }
        None
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
        while let Some((hash, ticket)) = share.queue.pop_front() {
            let Ok(mut found) = self
                .records
                .find_entry(hash, |e| e.slot_is(hash, ticket, rule))
            else {
                continue; // stale: removed, re-queued, or used by another rule since
            };
            let entry = found.get_mut();
            if !entry.evictable {
                // Limited since it was queued: out of the queue until a use frees it.
                entry.queued = false;
                continue;
            }
            if entry.referenced {
                entry.referenced = false;
                share.queue.push_back((hash, ticket));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rule::Rule;
    use crate::step::{apply, Op};
    use std::time::Duration;

    const SEC: u64 = 1_000_000_000;

    fn limits(capacity: usize) -> Limits {
        Limits {
            per_shard_capacity: capacity,
            per_shard_rule_cap: capacity,
            scope_shares: Vec::new(),
            capacity,
            evictions: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
        }
    }

    /// An entry for `key` after one check under `rule` (`hash` forced, to make collisions).
    fn checked(hash: u64, key: &str, rule: &Rule) -> Entry {
        let mut record = Record::fresh(rule, SEC);
        let outcome = apply(rule, &mut record, &Op::Check { cost: 1 }, SEC).unwrap();
        Entry {
            hash,
            scope: 0,
            key: Key::new(key).unwrap(),
            evictable: evictable(&record, &outcome),
            record,
            rule: 7,
            referenced: false,
            queued: false,
            ticket: 0,
        }
    }

    /// A key that comes and goes (removed, then stored again) used to leave a slot per
    /// coming that compaction could not tell from a live one: the queue grew without bound.
    #[test]
    fn a_key_that_comes_and_goes_leaves_one_slot() {
        let rule = Rule::fixed_window(10, Duration::from_secs(60)).unwrap();
        let limits = limits(100);
        let mut table = Table::default();
        for _ in 0..1000 {
            table
                .put(checked(1, "k", &rule), SEC, &limits, false)
                .unwrap();
            table.remove(1, 0, &Key::new("k").unwrap());
        }
        table
            .put(checked(1, "k", &rule), SEC, &limits, false)
            .unwrap();
        let queue = table.rules.get(&7).map_or(0, |s| s.queue.len());
        assert!(queue <= 2 + 16, "{queue} slots for one record");
    }

    /// Records whose hashes collide each keep a slot of their own: all may be evicted.
    #[test]
    fn colliding_records_are_each_evictable() {
        let rule = Rule::fixed_window(10, Duration::from_secs(60)).unwrap();
        let limits = limits(4);
        let mut table = Table::default();
        for i in 0..4 {
            let entry = checked(0x5EED, &format!("old-{i}"), &rule);
            table.put(entry, SEC, &limits, false).unwrap();
        }
        for i in 0..4 {
            let entry = checked(0x5EED, &format!("new-{i}"), &rule);
            table.put(entry, SEC, &limits, false).unwrap();
        }
        assert_eq!(table.len(), 4);
        assert!(
            (0..4).all(|i| table
                .get(0x5EED, 0, &Key::new(format!("new-{i}")).unwrap())
                .is_some()),
            "every old record went"
        );
        assert_eq!(limits.evictions.load(Ordering::Relaxed), 4);
    }
}
