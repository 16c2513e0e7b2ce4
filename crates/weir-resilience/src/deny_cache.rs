//! [`OverLimitCache`]: answers repeat checks of a denied key in-process until its
//! `retry_after`, so a client hammering a limit costs no store round trip. Sits in front of
//! a network store (usually in front of a [`FailoverStore`](crate::FailoverStore)).
//!
//! Exactness: without a lockout a denial changes nothing in the store, and with one the key
//! is blocked until `retry_after`; either way the same check before `retry_after` would be
//! denied again, so answering it locally changes no decision this instance makes. What it
//! cannot see is another instance resetting, unblocking or rewarding the key: such a key
//! stays denied here until its cached `retry_after` at most. Local `reward`, `unblock`,
//! `reset` and `penalty` drop the cached denial. Concurrency leases are never cached (a
//! release can free a slot before `retry_after`).

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use weir_core::{
    Algorithm, CheckError, Decision, Decisions, Key, Op, Outcome, Rule, Store, StoreError,
};

const SHARDS: usize = 16;

/// A cached denial.
#[derive(Debug, Clone, Copy)]
struct Denial {
    cost: u64,
    until_ns: u64,
    reset_at_ns: u64,
    decision: Decision,
}

/// Counters for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverLimitStats {
    /// Checks answered from the cache.
    pub hits: u64,
    /// Denials held now.
    pub entries: usize,
}

/// A [`Store`] that remembers denials until their `retry_after`. Bounded: at most
/// `capacity` denials are held (expired ones are dropped first; beyond that new denials
/// are simply not cached).
#[derive(Debug)]
pub struct OverLimitCache<S> {
    inner: S,
    shards: Box<[Mutex<HashMap<u64, Denial>>]>,
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

    fn slot(&self, key: &Key) -> (u64, &Mutex<HashMap<u64, Denial>>) {
        let hash = self.hasher.hash_one(key.as_bytes());
        let index = usize::try_from(hash >> 60).unwrap_or(0) % SHARDS;
        (hash, &self.shards[index])
    }

    fn cached(&self, key: &Key, cost: u64, now_ns: u64) -> Option<Decision> {
        let (hash, shard) = self.slot(key);
        let mut map = lock(shard);
        let denial = *map.get(&hash)?;
        if denial.until_ns <= now_ns {
            map.remove(&hash);
            return None;
        }
        (denial.cost == cost).then(|| Decision {
            retry_after: Duration::from_nanos(denial.until_ns - now_ns),
            reset_after: Duration::from_nanos(denial.reset_at_ns.saturating_sub(now_ns)),
            ..denial.decision
        })
    }

    fn remember(&self, key: &Key, cost: u64, now_ns: u64, d: &Decision) {
        let until_ns = now_ns.saturating_add(nanos(d.retry_after));
        let (hash, shard) = self.slot(key);
        let mut map = lock(shard);
        if map.len() >= self.per_shard {
            map.retain(|_, e| e.until_ns > now_ns);
            if map.len() >= self.per_shard {
                return;
            }
        }
        map.insert(
            hash,
            Denial {
                cost,
                until_ns,
                reset_at_ns: now_ns.saturating_add(nanos(d.reset_after)),
                decision: *d,
            },
        );
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
            Op::Check { cost: cost @ 1.. } if cacheable => {
                if let Some(d) = self.cached(key, cost, now_ns) {
                    self.hits.fetch_add(1, Ordering::Relaxed);
                    return Ok(Outcome::Decision(d));
                }
                let outcome = self.inner.apply(key, rule, op, now_ns).await?;
                if let Outcome::Decision(d) = &outcome {
                    if !d.allowed && !d.retry_after.is_zero() {
                        self.remember(key, cost, now_ns, d);
                    }
                }
                Ok(outcome)
            }
            Op::Reward { .. } | Op::Unblock | Op::Reset | Op::Penalty { .. } | Op::Block { .. } => {
                self.forget(key);
                self.inner.apply(key, rule, op, now_ns).await
            }
            _ => self.inner.apply(key, rule, op, now_ns).await,
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn lock(m: &Mutex<HashMap<u64, Denial>>) -> std::sync::MutexGuard<'_, HashMap<u64, Denial>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: Store> Store for OverLimitCache<S> {
    fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Outcome, CheckError>> + Send {
        self.decide(key, rule, op, now_ns)
    }

    fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Decisions, CheckError>> + Send {
        self.inner.check_all(limits, cost, now_ns)
    }

    fn ping(&self) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.inner.ping()
    }
}
