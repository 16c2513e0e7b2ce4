//! Which records a snapshot keeps and how they come back: [`MemoryStore::export_limited`]
//! walks the shards and the lock-free tables for records blocked, locked out or limited
//! now, and [`MemoryStore::import`] takes a decoded snapshot's records back in, each judged
//! under the rule in force for its scope (and clamped by `restore.rs`). Off the path of a
//! decision: the engine calls both around serving. `snapshot.rs` has the format.

use std::time::Duration;

use crate::key::Key;
use crate::rule::Rule;
use crate::state::{Record, State};
use crate::step::{apply, Op, Outcome};

use super::super::general::{evictable, Entry};
use super::super::restore::clamp;
use super::super::MemoryStore;
use super::record::encodable;
use super::{ImportReport, SavedRecord, StateSnapshot};

/// How far ahead of now an instant may be: twice the longest span a rule accepts.
const HORIZON_NS: u64 = 2 * 10 * 365 * 24 * 3600 * 1_000_000_000;

impl MemoryStore {
    /// The records worth keeping across a restart, at `now_ns`: blocked, locked out or
    /// limited (see the module docs of `snapshot.rs`: the next request of one unit would be
    /// refused now), each judged under `rule_of(scope)`, the rule in force for its scope;
    /// a record whose scope has none is left out. Locks one shard at a time.
    pub fn export_limited(
        &self,
        now_ns: u64,
        rule_of: impl Fn(u64) -> Option<Rule>,
    ) -> StateSnapshot {
        let inner = &*self.inner;
        let mut records = Vec::new();
        for i in 0..inner.shards.len() {
            let table = inner.lock(i);
            for entry in table.entries() {
                let Some(rule) = rule_of(entry.scope) else {
                    continue;
                };
                // Allowing at its last operation under this very rule, no guard: not
                // limited now either (usage only decays between operations), and no
                // copy or peek is needed (the lock is held for less).
                if entry.evictable && entry.rule == inner.rule_hash(&rule) {
                    continue;
                }
                if encodable(&entry.record.state) && worth_keeping(&rule, &entry.record, now_ns) {
                    records.push(SavedRecord {
                        scope: entry.scope,
                        key: entry.key.clone(),
                        record: entry.record.clone(),
                    });
                }
            }
        }
        let lock_free = inner.compact.records().chain(inner.strings.records());
        for (scope, meter, key, word) in lock_free {
            let limited = meter.expires_ns(word) > now_ns && !meter.allows_one_more(word, now_ns);
            if !limited || rule_of(scope).is_none() {
                continue;
            }
            if let Ok(key) = Key::new(key) {
                let record = meter.record(word, now_ns);
                records.push(SavedRecord { scope, key, record });
            }
        }
        StateSnapshot {
            taken_ns: now_ns,
            records,
            ..StateSnapshot::default()
        }
    }

    /// Takes a snapshot's records in, each validated under `rule_of(scope)` at `now_ns`: a
    /// record whose rule is not in force, that expired since, or that is not valid is
    /// dropped (and counted). A record that claims more than its rule allows is clamped to
    /// it (counted in [`ImportReport::clamped`]; `restore.rs` says what is allowed): a
    /// lockout to the rule's lockout max, any other block to `max_block` (the admin API's
    /// maximum), both from `now_ns`. A record replaces what the store held for its
    /// (scope, key).
    /// Meant for a store that has not served yet (the engine calls it before serving).
    pub fn import(
        &self,
        snapshot: &StateSnapshot,
        now_ns: u64,
        max_block: Duration,
        rule_of: impl Fn(u64) -> Option<Rule>,
    ) -> ImportReport {
        let max_block_ns = u64::try_from(max_block.as_nanos()).unwrap_or(u64::MAX);
        let inner = &*self.inner;
        let mut report = ImportReport {
            invalid: snapshot.invalid_count,
            first_invalid: snapshot.invalid.first().cloned(),
            ..ImportReport::default()
        };
        for saved in &snapshot.records {
            let (scope, key, record) = (saved.scope, &saved.key, &saved.record);
            let Some(rule) = rule_of(scope) else {
                report.no_rule += 1;
                continue;
            };
            if !record.is_live(now_ns) {
                report.expired += 1;
                continue;
            }
            let mut record = record.clone();
            if let Some(why) = clamp(&rule, &mut record, now_ns, max_block_ns) {
                report.clamped += 1;
                report
                    .first_clamped
                    .get_or_insert_with(|| format!("{key:?}: {why}"));
            }
            let record = &record;
            if latest_ns(record) > now_ns.saturating_add(HORIZON_NS) {
                report.invalid(format!("{key:?}: an instant decades ahead"));
                continue;
            }
            let mut copy = record.clone();
            let peek = match apply(&rule, &mut copy, &Op::Check { cost: 0 }, now_ns) {
                Ok(peek) => peek,
                Err(e) => {
                    report.invalid(format!("{key:?}: {e}"));
                    continue;
                }
            };
            let hash = inner.hash(scope, key);
            let mut table = inner.lock(inner.shard_index(hash));
            // The snapshot's record replaces one the lock-free path held.
            let _ = inner.take_lock_free(hash, scope, key, now_ns);
            let entry = Entry {
                hash,
                scope,
                key: key.clone(),
                evictable: evictable(record, &peek),
                record: record.clone(),
                rule: inner.rule_hash(&rule),
                referenced: false,
                queued: false,
                ticket: 0,
            };
            match table.put(entry, now_ns, &inner.limits, false) {
                Ok(()) => report.restored += 1,
                Err(_) => report.refused += 1,
            }
        }
        report
    }
}

impl ImportReport {
    fn invalid(&mut self, why: String) {
        self.invalid += 1;
        self.first_invalid.get_or_insert(why);
    }
}

/// Blocked, locked out, or limited (the next unit refused now) under `rule`.
fn worth_keeping(rule: &Rule, record: &Record, now_ns: u64) -> bool {
    if !record.is_live(now_ns) {
        return false;
    }
    if let Some(g) = record.guard.as_deref() {
        if g.blocked_until_ns > now_ns || (g.strikes > 0 && g.strikes_expire_ns > now_ns) {
            return true;
        }
    }
    let mut copy = record.clone();
    matches!(
        apply(rule, &mut copy, &Op::Check { cost: 0 }, now_ns),
        Ok(Outcome::Decision(d)) if !d.allowed
    )
}

#[allow(unreachable_patterns)]
fn latest_ns(record: &Record) -> u64 {
    let state_ns = match &record.state {
        State::FixedWindow(s) => s.window_start_ns,
        State::Sliding(s) => s.buckets.back().map_or(0, |b| b.0),
        State::Weighted(s) => s.window_start_ns,
        State::TokenBucket(s) => s.last_ns,
        State::LeakyBucket(s) => s.last_ns,
        State::Gcra(s) => s.tat_ns,
        State::LeakyQueue(s) => s.next_free_ns,
        State::Concurrency(s) => s.leases.iter().map(|l| l.expires_ns).max().unwrap_or(0),
        State::GcraWarm(s) => s.state.tat_ns,
        State::TokenBucketWarm(s) => s.state.last_ns,
        _ => 0,
    };
    let guard_ns = record
        .guard
        .as_deref()
        .map_or(0, |g| g.blocked_until_ns.max(g.strikes_expire_ns));
    state_ns.max(guard_ns).max(record.expires_ns)
}
