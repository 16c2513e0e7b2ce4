//! All-or-nothing checks on the memory store ([`Store::check_all`](crate::Store::check_all)):
//! the shards of every limit locked at once (in index order, so two such checks never
//! deadlock), every limit decided on a copy, and the copies written back only when all
//! allow (a denial's record too, for its lockout). A record the lock-free path held moves
//! to the general one first. The proxy's every request comes here.

use std::sync::MutexGuard;

use smallvec::SmallVec;

use crate::error::CheckError;
use crate::key::Key;
use crate::rule::Rule;
use crate::state::Record;
use crate::step::{check_now, Outcome};
use crate::store::Decisions;

use super::general::{evictable, Entry, Limits, Table};
use super::routing::{MemoryStore, UNSCOPED};

/// A few of something, one per limit of a check: inline up to four (a request's limits,
/// the proxy's two or three), so a check allocates nothing but its answer.
type Inline<T> = SmallVec<[T; 4]>;

impl MemoryStore {
    /// [`Store::check_all`](crate::Store::check_all), synchronously: locks the shards involved in index order (so
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
    /// [`Limiter`](crate::Limiter) asks ([`ScopedLimits::scoped`](crate::store::ScopedLimits::scoped)).
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
        let ids: Inline<(u64, u64)> = limits
            .iter()
            .map(|(k, r)| {
                let scope = scope_of(r);
                (inner.hash(scope, k), scope)
            })
            .collect();
        let mut shard_ids: Inline<usize> = ids.iter().map(|(h, _)| inner.shard_index(*h)).collect();
        shard_ids.sort_unstable();
        shard_ids.dedup();
        let mut tables: Inline<(usize, MutexGuard<'_, Table>)> =
            shard_ids.iter().map(|&i| (i, inner.lock(i))).collect();
        let table_of = |tables: &mut Inline<(usize, MutexGuard<'_, Table>)>, hash: u64| {
            let id = inner.shard_index(hash);
            tables.iter().position(|(i, _)| *i == id)
        };

        // (hash, scope, key, working copy, rule hash), one per distinct record.
        let mut work: Inline<(u64, u64, &Key, Record, u64)> = Inline::new();
        // For each limit, the index of its record's working copy (a record may repeat).
        let mut slots: Inline<usize> = Inline::new();
        let mut each = Vec::with_capacity(limits.len());
        for ((key, rule), &(hash, scope)) in limits.iter().zip(&ids) {
            let found = work
                .iter()
                .position(|(h, s, k, _, _)| *h == hash && *s == scope && *k == key);
            let slot = match found {
                Some(slot) => slot,
                None => {
                    let rule_hash = inner.rule_hash(rule);
                    let held = match table_of(&mut tables, hash) {
                        Some(t) => held_record(
                            &inner.limits,
                            &mut tables[t].1,
                            Moving {
                                hash,
                                scope,
                                key,
                                rule_hash,
                                now_ns,
                                lock_free: || inner.take_lock_free(hash, scope, key, now_ns),
                            },
                        )?,
                        None => None,
                    };
                    let copy = held
                        .filter(|r| r.is_live(now_ns))
                        .unwrap_or_else(|| Record::fresh(rule, now_ns));
                    work.push((hash, scope, key, copy, rule_hash));
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
}

/// Where to find a record for [`held_record`], and the lock-free path's record to move.
struct Moving<'k, F> {
    hash: u64,
    scope: u64,
    key: &'k Key,
    rule_hash: u64,
    now_ns: u64,
    lock_free: F,
}

/// A copy of the record `at` names in `table`. A record the lock-free path held moves to
/// the general one first (whatever the outcome it stays there: a move must not lose it).
/// One look-up when the general table holds it.
fn held_record(
    limits: &Limits,
    table: &mut Table,
    at: Moving<'_, impl FnOnce() -> Option<Record>>,
) -> Result<Option<Record>, CheckError> {
    if let Some(entry) = table.get(at.hash, at.scope, at.key) {
        return Ok(Some(entry.record.clone()));
    }
    let Some(record) = (at.lock_free)() else {
        return Ok(None);
    };
    let entry = Entry {
        hash: at.hash,
        scope: at.scope,
        key: at.key.clone(),
        evictable: false,
        record: record.clone(),
        rule: at.rule_hash,
        referenced: true,
        queued: false,
        ticket: 0,
    };
    table.put(entry, at.now_ns, limits, true)?;
    Ok(Some(record))
}
