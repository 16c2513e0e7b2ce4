//! Stores: where records live, and the promise each makes: [`step::apply`](crate::step::apply)
//! runs atomically per key. The embedded [`MemoryStore`] is the default; Redis and memcached
//! stores live in their own crates and must pass `weir-testkit`'s conformance suite.

mod memory;

use std::future::Future;

pub(crate) use memory::WordMeter;
pub use memory::{BlockedKey, BlockedKeys};
pub use memory::{ImportReport, SavedRecord, SnapshotError, StateSnapshot, MAX_SNAPSHOT_BYTES};
pub use memory::{MemoryStats, MemoryStore, MemoryStoreBuilder};

use crate::decision::Decision;
use crate::error::{CheckError, StoreError};
use crate::key::Key;
use crate::rule::Rule;
use crate::step::{Op, Outcome};

/// The decisions of several limits checked together (e.g. 10/s and 1000/h for one user).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decisions {
    /// True iff every limit allowed; only then was anything consumed.
    pub allowed: bool,
    /// One decision per limit, in the order given. When `allowed` is false, the limits
    /// that would have allowed show `allowed: true` but consumed nothing.
    pub each: Vec<Decision>,
}

impl Decisions {
    /// One decision standing for all: the overall `allowed`, the smallest `remaining` (with
    /// its limit), and the longest `retry_after`, `reset_after` and `delay`. This is what
    /// goes into `RateLimit` headers.
    pub fn most_restrictive(&self) -> Option<Decision> {
        let tightest = self.each.iter().min_by_key(|d| (d.allowed, d.remaining))?;
        Some(Decision {
            allowed: self.allowed,
            limit: tightest.limit,
            remaining: tightest.remaining,
            reset_after: self.each.iter().map(|d| d.reset_after).max()?,
            retry_after: self
                .each
                .iter()
                .filter(|d| !d.allowed)
                .map(|d| d.retry_after)
                .max()
                .unwrap_or_default(),
            delay: self.each.iter().map(|d| d.delay).max()?,
        })
    }
}

/// Somewhere to keep records, applying one [`Op`] per key atomically.
///
/// `now_ns` is the caller's clock; a store that counts on its own clock (Redis `TIME`) may
/// ignore it, but must never move a record backwards in time.
pub trait Store: Send + Sync + 'static {
    /// Applies `op` to `key`'s record under `rule`, atomically.
    fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl Future<Output = Result<Outcome, CheckError>> + Send;

    /// Checks `cost` against every `(key, rule)` at once, all-or-nothing: nothing is
    /// consumed unless every limit allows. A denied limit still engages its lockout.
    fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> impl Future<Output = Result<Decisions, CheckError>> + Send;

    /// Applies `op` to the record of (`rule`, `key`), atomically: the record a
    /// [`Limiter`](crate::Limiter) uses, so that two rules on one key never share one
    /// (see [`Rule::named`]). Stores that keep records by bytes (Redis, memcached) use the
    /// default, the key scoped by [`Rule::scope`] (`<16 hex digits>:<key>`); the memory
    /// store keeps the scope beside the key.
    fn apply_scoped(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl Future<Output = Result<Outcome, CheckError>> + Send {
        let key = key.scoped(rule.scope());
        let rule = *rule;
        async move { self.apply(&key, &rule, op, now_ns).await }
    }

    /// [`check_all`](Self::check_all) on the records of each (rule, key), as
    /// [`apply_scoped`](Self::apply_scoped).
    fn check_all_scoped(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> impl Future<Output = Result<Decisions, CheckError>> + Send {
        let scoped: Vec<(Key, Rule)> = limits
            .iter()
            .map(|(key, rule)| (key.scoped(rule.scope()), *rule))
            .collect();
        async move { self.check_all(&scoped, cost, now_ns).await }
    }

    /// Whether the store answers (Redis `PING`, memcached `version`). Health probes and
    /// readiness checks call it; the memory store always answers.
    fn ping(&self) -> impl Future<Output = Result<(), StoreError>> + Send {
        std::future::ready(Ok(()))
    }

    /// How many parts this store's keys are spread over, each of which can fail while the
    /// others answer (the servers of a memcached list). A failure guard keeps one circuit
    /// per part, so a dead part sends only its own keys to their rule's failure policy.
    /// Default 1: the store fails as a whole.
    fn parts(&self) -> usize {
        1
    }

    /// The part (`0..parts()`) that holds the records of `key`, the key exactly as
    /// [`apply`](Self::apply) receives it. Default 0.
    fn part_of(&self, key: &Key) -> usize {
        let _ = key;
        0
    }

    /// Whether part `part` answers: what a failure guard probes to close that part's
    /// circuit. Default: [`ping`](Self::ping), the whole store.
    fn ping_part(&self, part: usize) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = part;
        self.ping()
    }
}
