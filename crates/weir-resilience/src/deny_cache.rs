//! [`OverLimitCache`]: answers repeat checks of a denied key in-process until its
//! `retry_after`, so a client hammering a limit costs no store round trip. Sits in front of
//! a network store (usually in front of a [`FailoverStore`](crate::FailoverStore)).
//!
//! It also remembers the denial an allowed check announces: one that left fewer units than
//! it cost, under the fixed window, GCRA or a bucket, tells exactly how long the same check
//! would be denied ([`Rule::retry_after_allowed`]). Under overload only admissions then
//! reach the store, not the first denial after each of them. Not under a lockout, whose
//! first denial must reach the store to engage it.
//!
//! When a cached denial runs out, one check of that key goes to the store (the probe) and
//! the others of the same key wait for its answer, then look again: usually the probe's
//! admission has announced the next denial, and they are answered here. Without that wait
//! every check arriving during the probe's round trip would reach the store too. Keys with
//! nothing cached never wait.
//!
//! A denial answers checks of the same cost under the same rule only. A named rule keeps
//! its key (and its record) when its parameters change (a reload, `CL.THROTTLE` called with
//! new arguments), and the new parameters may admit what the old ones denied, so such a
//! check asks the store.
//!
//! Exactness: without a lockout a denial changes nothing in the store, and with one the key
//! is blocked until `retry_after`; either way the same check before `retry_after` would be
//! denied again, so answering it locally changes no decision this instance makes. What it
//! cannot see is another instance resetting, unblocking or rewarding the key: such a key
//! stays denied here until its cached `retry_after` at most. Local `reward`, `unblock`,
//! `reset` and `penalty` drop the cached denial. Concurrency leases are never cached (a
//! release can free a slot before `retry_after`), nor is a fail-closed denial made while the
//! store is down (`failed_closed.rs`: it costs no store call and is no limit).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

use crate::failed_closed::{note_failed_closed, noting_failed_closed};
use weir_core::{
    Algorithm, CheckError, Decision, Decisions, Key, Op, Outcome, Rule, ScopedKey, ScopedLimits,
    Store, StoreError,
};

const SHARDS: usize = 16;

/// A cached denial.
#[derive(Debug, Clone, Copy)]
struct Denial {
    /// The hash of the rule it was decided under: a named rule keeps its key (and its
    /// record) when its parameters change, and the new parameters may allow what the old
    /// ones denied, so a denial answers checks of the same rule only.
    rule: u64,
    cost: u64,
    until_ns: u64,
    reset_at_ns: u64,
    decision: Decision,
}

/// What the cache holds for a key.
#[derive(Debug, Clone)]
enum Entry {
    /// Checks of this cost are denied until `until_ns`.
    Denied(Denial),
    /// A denial ran out and one check is asking the store; the key's other checks wait on
    /// this until it settles the entry.
    Probing(Arc<Notify>),
}

type Shard = Mutex<HashMap<u64, Entry>>;

/// What the cache says about one check.
enum Lookup<'a> {
    /// A live denial of this cost: the answer.
    Hit(Decision),
    /// Another check of the key is probing the store: wait for it, then look again.
    Wait(OwnedNotified),
    /// This check is the probe: ask the store, then settle the entry.
    Probe(ProbeGuard<'a>),
    /// A live denial of another cost, or decided under other parameters.
    Other,
    /// Nothing cached.
    Miss,
}

/// Counters for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimitStats {
    /// Checks answered from the cache.
    pub hits: u64,
    /// Denials held now (and keys being probed).
    pub entries: usize,
}

/// A [`Store`] that remembers denials until their `retry_after`. Bounded: at most
/// `capacity` denials are held (expired ones are dropped first; beyond that new denials
/// are simply not cached).
#[derive(Debug)]
pub struct OverLimitCache<S> {
    inner: S,
    shards: Box<[Shard]>,
    per_shard: usize,
    hasher: foldhash::quality::RandomState,
    hits: AtomicU64,
}

impl<S: Store> OverLimitCache<S> {
    /// Caches up to 100 000 denials in front of `inner`.
    pub fn new(inner: S) -> Self {
        Self::with_capacity(inner, 100_000)
    }

    /// Caches up to `capacity` denials in front of `inner`.
    pub fn with_capacity(inner: S, capacity: usize) -> Self {
        Self {
            inner,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: capacity.div_ceil(SHARDS).max(1),
            hasher: foldhash::quality::RandomState::default(),
            hits: AtomicU64::new(0),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Counters for metrics.
    pub fn stats(&self) -> OverLimitStats {
        OverLimitStats {
            hits: self.hits.load(Ordering::Relaxed),
            entries: self.shards.iter().map(|s| lock(s).len()).sum(),
        }
    }

    fn slot(&self, key: &Key) -> (u64, &Shard) {
        let hash = self.hasher.hash_one(key.as_bytes());
        let index = usize::try_from(hash >> 60).unwrap_or(0) % SHARDS;
        (hash, &self.shards[index])
    }

    fn lookup(&self, key: &Key, rule: u64, cost: u64, now_ns: u64) -> Lookup<'_> {
        let (hash, shard) = self.slot(key);
        let mut map = lock(shard);
        let denial = match map.get(&hash) {
            None => return Lookup::Miss,
            // Registered under the lock, so the probe's wake-up cannot be missed.
            Some(Entry::Probing(notify)) => return Lookup::Wait(notify.clone().notified_owned()),
            Some(Entry::Denied(denial)) => *denial,
        };
        if denial.until_ns <= now_ns {
            let notify = Arc::new(Notify::new());
            map.insert(hash, Entry::Probing(notify.clone()));
            return Lookup::Probe(ProbeGuard {
                shard,
                hash,
                notify,
                settled: false,
            });
        }
        if denial.cost != cost || denial.rule != rule {
            return Lookup::Other;
        }
        Lookup::Hit(Decision {
            retry_after: Duration::from_nanos(denial.until_ns - now_ns),
            reset_after: Duration::from_nanos(denial.reset_at_ns.saturating_sub(now_ns)),
            ..denial.decision
        })
    }

    fn remember(&self, key: &Key, denial: Denial, now_ns: u64) {
        let (hash, shard) = self.slot(key);
        let mut map = lock(shard);
        if map.len() >= self.per_shard {
            map.retain(|_, e| !matches!(e, Entry::Denied(d) if d.until_ns <= now_ns));
            if map.len() >= self.per_shard {
                return;
            }
        }
        map.insert(hash, Entry::Denied(denial));
    }

    fn forget(&self, key: &Key) {
        let (hash, shard) = self.slot(key);
        lock(shard).remove(&hash);
    }

    async fn decide(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let cacheable = !matches!(rule.algorithm(), Algorithm::Concurrency(_));
        match op {
            Op::Check { cost: cost @ 1.. } if cacheable => loop {
                let rule_id = self.hasher.hash_one(rule);
                let lookup = match self.lookup(key, rule_id, cost, now_ns) {
                    Lookup::Hit(d) => {
                        self.hits.fetch_add(1, Ordering::Relaxed);
                        return Ok(Outcome::Decision(d));
                    }
                    Lookup::Wait(probe_settled) => {
                        probe_settled.await;
                        continue;
                    }
                    lookup => lookup,
                };
                let (outcome, failed_closed) =
                    noting_failed_closed(self.inner.apply(ScopedKey::plain(key), rule, op, now_ns))
                        .await;
                if failed_closed {
                    note_failed_closed();
                }
                let outcome = outcome?;
                // A fail-closed denial is no limit: never cached (`failed_closed.rs`).
                let denial = match &outcome {
                    Outcome::Decision(d) if !failed_closed => {
                        denial_after((rule, rule_id), d, cost, now_ns)
                    }
                    _ => None,
                };
                let allowed = matches!(&outcome, Outcome::Decision(d) if d.allowed);
                match (lookup, denial) {
                    (Lookup::Probe(probe), denial) => probe.settle(denial),
                    (_, Some(denial)) => self.remember(key, denial, now_ns),
                    // An admission moved the state the other denial was read from.
                    (Lookup::Other, None) if allowed => self.forget(key),
                    _ => {}
                }
                return Ok(outcome);
            },
            Op::Reward { .. } | Op::Unblock | Op::Reset | Op::Penalty { .. } | Op::Block { .. } => {
                self.forget(key);
                self.inner
                    .apply(ScopedKey::plain(key), rule, op, now_ns)
                    .await
            }
            _ => {
                self.inner
                    .apply(ScopedKey::plain(key), rule, op, now_ns)
                    .await
            }
        }
    }
}

/// The probe's claim on a key. Settling it (or dropping it, when the store call failed or
/// the caller went away) replaces the `Probing` entry and wakes the key's waiting checks.
struct ProbeGuard<'a> {
    shard: &'a Shard,
    hash: u64,
    notify: Arc<Notify>,
    settled: bool,
}

impl ProbeGuard<'_> {
    fn settle(mut self, denial: Option<Denial>) {
        self.replace(denial);
        self.settled = true;
    }

    fn replace(&self, denial: Option<Denial>) {
        let mut map = lock(self.shard);
        let ours =
            matches!(map.get(&self.hash), Some(Entry::Probing(n)) if Arc::ptr_eq(n, &self.notify));
        if ours {
            match denial {
                Some(denial) => map.insert(self.hash, Entry::Denied(denial)),
                None => map.remove(&self.hash),
            };
        }
        drop(map);
        self.notify.notify_waiters();
    }
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.replace(None);
        }
    }
}

/// The denial to remember after the store answered `d` to a check of `cost`: `d` itself
/// when it denied, or the denial an allowed `d` announces ([`Rule::retry_after_allowed`]),
/// except under a lockout: there the store must see that denial, which engages the lockout.
fn denial_after(
    (rule, rule_id): (&Rule, u64),
    d: &Decision,
    cost: u64,
    now_ns: u64,
) -> Option<Denial> {
    let decision = if d.allowed {
        if rule.lockout().is_some() {
            return None;
        }
        Decision {
            allowed: false,
            retry_after: rule.retry_after_allowed(d, cost)?,
            delay: Duration::ZERO,
            ..*d
        }
    } else if d.retry_after.is_zero() {
        return None;
    } else {
        *d
    };
    Some(Denial {
        rule: rule_id,
        cost,
        until_ns: now_ns.saturating_add(nanos(decision.retry_after)),
        reset_at_ns: now_ns.saturating_add(nanos(decision.reset_after)),
        decision,
    })
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn lock(m: &Shard) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: Store> Store for OverLimitCache<S> {
    /// Caches by the record's name: a scoped key's is [`ScopedKey::record`], and the
    /// wrapped store is asked for that record, plain.
    async fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        self.decide(&key.record(rule), rule, op, now_ns).await
    }

    async fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        let records = limits.records();
        self.inner
            .check_all(ScopedLimits::plain(&records), cost, now_ns)
            .await
    }

    fn ping(&self) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.inner.ping()
    }
}
