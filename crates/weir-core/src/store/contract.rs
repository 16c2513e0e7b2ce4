//! The [`Store`] trait: what every store promises (one [`Op`] per record, atomically;
//! several limits all-or-nothing) and nothing more. The memory store (`memory/`), Redis,
//! memcached and the resilience wrappers implement it; a [`Limiter`](crate::Limiter) calls
//! it with the scope inside its key argument ([`ScopedKey`], [`ScopedLimits`]).

use std::future::Future;

use crate::error::{CheckError, StoreError};
use crate::rule::Rule;
use crate::step::{Op, Outcome};

use super::{Decisions, ScopedKey, ScopedLimits};

/// Somewhere to keep records, applying one [`Op`] per key atomically.
///
/// `now_ns` is the caller's clock; a store that counts on its own clock (Redis `TIME`) may
/// ignore it, but must never move a record backwards in time.
pub trait Store: Send + Sync + 'static {
    /// Applies `op` to the record `key` names under `rule`, atomically: the key's own
    /// ([`ScopedKey::plain`]) or (`rule`, key)'s ([`ScopedKey::scoped`], what a
    /// [`Limiter`](crate::Limiter) uses, so that two rules on one key never share a record:
    /// see [`Rule::named`]). A store that keeps records by bytes (Redis, memcached) names
    /// a scoped one [`ScopedKey::record`]; the memory store keeps the scope beside the key.
    fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl Future<Output = Result<Outcome, CheckError>> + Send;

    /// Checks `cost` against every `(key, rule)` at once, all-or-nothing: nothing is
    /// consumed unless every limit allows. A denied limit still engages its lockout.
    /// Each limit names its record as [`apply`](Self::apply)'s key does.
    fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> impl Future<Output = Result<Decisions, CheckError>> + Send;

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

    /// The part (`0..parts()`) that holds the record `key` names under `rule`, as
    /// [`apply`](Self::apply) receives them. Default 0.
    fn part_of(&self, key: ScopedKey<'_>, rule: &Rule) -> usize {
        let _ = (key, rule);
        0
    }

    /// Whether part `part` answers: what a failure guard probes to close that part's
    /// circuit. Default: [`ping`](Self::ping), the whole store.
    fn ping_part(&self, part: usize) -> impl Future<Output = Result<(), StoreError>> + Send {
        let _ = part;
        self.ping()
    }
}
