//! [`FailoverStore`]: a store wrapper that keeps limiting when the shared store fails. Sits
//! between the [`Limiter`](weir_core::Limiter) (or the over-limit cache) and a network store.
//! Each call gets a timeout; a failed read-only call is tried once more; each part of the
//! store (the whole store, one server of a memcached list, or one primary of a Redis Cluster:
//! [`Store::parts`]) has its own
//! circuit, opened by consecutive failures confirmed by a failed PING (`breaker.rs`); while
//! a part's circuit is open each rule's [`FailurePolicy`] decides for the keys on that part
//! alone, without touching the store; a background PING probe (`probe.rs`) closes it again.
//! A fail-closed denial is marked for a caller that notes it (`failed_closed.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use weir_core::{
    CheckError, Decision, Decisions, FailurePolicy, Key, MemoryStore, Op, Outcome, Rule, ScopedKey,
    ScopedLimits, Store, StoreError,
};

use crate::breaker::{Breaker, Mode, Next};
use crate::failed_closed::note_failed_closed;

/// How a [`FailoverStore`] guards its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverConfig {
    /// The longest one store call may take before it counts as failed (default 500 ms:
    /// above the slowest call measured beside a CPU hog on a loaded 2-core host, 303 ms;
    /// `BENCHMARKS.md`, "Store timeouts on a loaded host").
    pub timeout: Duration,
    /// The longest a call may take until its part of the store has answered once
    /// (default 5 s): connecting, a fresh Redis Cluster's slot map and Weir's functions
    /// loaded on each node take longer than a decision and are not an outage. Never below
    /// `timeout`.
    pub first_timeout: Duration,
    /// Consecutive failed calls on one part of the store after which that part is PINGed;
    /// its circuit opens only if the PING fails too (default 5). One slow moment in which
    /// many calls time out together therefore opens nothing once the part answers again.
    pub failure_threshold: u32,
    /// How often the probe PINGs a store that is down (default 250 ms).
    pub probe_interval: Duration,
    /// How many instances at least share each limit: the local fallback allows each its
    /// share, `limit / n` ([`Rule::share`]), `n` the larger of this and the count learned
    /// from the store's presence key ([`FailoverStore::fallback_share`]; a
    /// [`LeasedStore`](crate::LeasedStore) in front divides by the same count when handed
    /// [`FailoverStore::instance_count`]). Default 1.
    pub instances: u64,
    /// Whether usage counted locally during an outage is pushed to the store (as penalties)
    /// when it answers again. Default off.
    pub reconcile: bool,
    /// The most keys whose local usage is remembered for reconciliation (default 100 000;
    /// usage of further keys is not reconciled).
    pub reconcile_capacity: usize,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        Self {
            timeout: Duration::from_millis(500),
            first_timeout: Duration::from_secs(5),
            failure_threshold: 5,
            probe_interval: Duration::from_millis(250),
            instances: 1,
            reconcile: false,
            reconcile_capacity: 100_000,
        }
    }
}

/// Counters for metrics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverStats {
    /// Where decisions are made now: [`Mode::Fallback`] while any part's circuit is open.
    pub mode: Mode,
    /// The parts of the store, each with its own circuit (1, the servers of a memcached
    /// list, or 64 for a Redis Cluster: one per primary, up to 64).
    pub parts: usize,
    /// The parts whose circuit is open now: their keys follow each rule's failure policy.
    pub open_parts: usize,
    /// How many times the mode changed.
    pub mode_changes: u64,
    /// Store calls that failed with an error.
    pub store_errors: u64,
    /// Store calls that timed out.
    pub store_timeouts: u64,
    /// Decisions made by a failure policy instead of the store.
    pub fallback_decisions: u64,
    /// Keys whose outage usage was pushed to the store on recovery.
    pub reconciled_keys: u64,
}

/// A [`Store`] that falls back to each rule's failure policy when `S` fails. Cheap to
/// clone; clones share the circuit. Must run inside a tokio runtime (for timeouts and the
/// probe).
#[derive(Debug)]
pub struct FailoverStore<S> {
    pub(crate) inner: Arc<Inner<S>>,
}

impl<S> Clone for FailoverStore<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Inner<S> {
    pub(crate) primary: S,
    local: MemoryStore,
    pub(crate) config: FailoverConfig,
    /// One circuit per part of the primary ([`Store::parts`]), at least one.
    pub(crate) breakers: Vec<Breaker>,
    pub(crate) last_now_ns: AtomicU64,
    /// Usage counted locally during an outage, per key: (rule, units, part).
    pub(crate) pending: Mutex<HashMap<Key, (Rule, u64, usize)>>,
    store_errors: AtomicU64,
    store_timeouts: AtomicU64,
    fallback_decisions: AtomicU64,
    pub(crate) reconciled_keys: AtomicU64,
    /// The instance count the presence key last answered (0: not known yet); shared with
    /// the leased store in front ([`FailoverStore::instance_count`]).
    pub(crate) learned_instances: Arc<AtomicU64>,
    /// This instance's holder id on the presence key: random, per store.
    pub(crate) instance_id: String,
}

fn open_decision(rule: &Rule) -> Decision {
    Decision {
        allowed: true,
        limit: rule.limit(),
        remaining: rule.limit(),
        reset_after: Duration::ZERO,
        retry_after: Duration::ZERO,
        delay: Duration::ZERO,
    }
}

fn closed_decision(rule: &Rule, retry_after: Duration) -> Decision {
    Decision {
        allowed: false,
        limit: rule.limit(),
        remaining: 0,
        reset_after: retry_after,
        retry_after,
        delay: Duration::ZERO,
    }
}

/// A random id for this instance's presence announcements.
fn instance_id() -> String {
    use std::hash::BuildHasher;
    let random = foldhash::quality::RandomState::default().hash_one(std::process::id());
    format!("{}-{random:016x}", std::process::id())
}

/// Whether `op` only reads (a peek or an inspect): such a call changes nothing in the
/// store, so trying it again after a failure cannot count anything twice.
fn read_only(op: Op<'_>) -> bool {
    matches!(op, Op::Check { cost: 0 } | Op::Inspect)
}

pub(crate) fn timeout_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl<S: Store> FailoverStore<S> {
    /// Guards `primary` with `config`.
    pub fn new(primary: S, config: FailoverConfig) -> Self {
        let breakers = (0..primary.parts().max(1))
            .map(|_| Breaker::default())
            .collect();
        Self {
            inner: Arc::new(Inner {
                primary,
                local: MemoryStore::default(),
                config,
                breakers,
                last_now_ns: AtomicU64::new(0),
                pending: Mutex::new(HashMap::new()),
                store_errors: AtomicU64::new(0),
                store_timeouts: AtomicU64::new(0),
                fallback_decisions: AtomicU64::new(0),
                reconciled_keys: AtomicU64::new(0),
                learned_instances: Arc::new(AtomicU64::new(0)),
                instance_id: instance_id(),
            }),
        }
    }

    /// The guarded store.
    pub fn primary(&self) -> &S {
        &self.inner.primary
    }

    /// Where decisions are made now: [`Mode::Fallback`] while any part's circuit is open.
    pub fn mode(&self) -> Mode {
        if self
            .inner
            .breakers
            .iter()
            .any(|b| b.mode() == Mode::Fallback)
        {
            Mode::Fallback
        } else {
            Mode::Store
        }
    }

    /// Where decisions on the keys of part `part` are made now.
    pub fn mode_of(&self, part: usize) -> Mode {
        self.breaker(part).mode()
    }

    /// The circuit of `part` (the first for a part the store does not have).
    pub(crate) fn breaker(&self, part: usize) -> &Breaker {
        // `new` makes at least one; a part past the last is the store's error, and the
        // last circuit stands for it.
        let breakers = &self.inner.breakers;
        &breakers[part.min(breakers.len().saturating_sub(1))]
    }

    /// Counters for metrics.
    pub fn stats(&self) -> FailoverStats {
        let i = &self.inner;
        FailoverStats {
            mode: self.mode(),
            parts: i.breakers.len(),
            open_parts: i
                .breakers
                .iter()
                .filter(|b| b.mode() == Mode::Fallback)
                .count(),
            mode_changes: i.breakers.iter().map(Breaker::mode_changes).sum(),
            store_errors: i.store_errors.load(Ordering::Relaxed),
            store_timeouts: i.store_timeouts.load(Ordering::Relaxed),
            fallback_decisions: i.fallback_decisions.load(Ordering::Relaxed),
            reconciled_keys: i.reconciled_keys.load(Ordering::Relaxed),
        }
    }

    /// Records a failed call on `part`; at the threshold, confirms with a PING of the part
    /// and opens its circuit (and starts its probe) if that fails too.
    async fn failed(&self, part: usize, cause: &StoreError) {
        let inner = &self.inner;
        match cause {
            StoreError::Timeout { .. } => inner.store_timeouts.fetch_add(1, Ordering::Relaxed),
            _ => inner.store_errors.fetch_add(1, Ordering::Relaxed),
        };
        let breaker = self.breaker(part);
        if breaker.record_failure(inner.config.failure_threshold) != Next::Confirm {
            return;
        }
        let answered = matches!(
            tokio::time::timeout(self.limit(&[part]), inner.primary.ping_part(part)).await,
            Ok(Ok(()))
        );
        if breaker.confirmed(answered) {
            tracing::warn!(
                error = %cause,
                failures = inner.config.failure_threshold,
                part,
                parts = inner.breakers.len(),
                "store failing: decisions on its keys fall back to each rule's failure policy"
            );
            self.start_probe(part);
        }
    }

    fn circuit_open() -> StoreError {
        StoreError::Unavailable(
            "circuit open: the store is failing, waiting for it to answer".into(),
        )
    }

    /// The bound of a call on `parts`: the timeout, or the first-contact timeout while
    /// one of them has never answered.
    fn limit(&self, parts: &[usize]) -> Duration {
        let config = &self.inner.config;
        if parts.iter().all(|p| self.breaker(*p).has_answered()) {
            config.timeout
        } else {
            config.timeout.max(config.first_timeout)
        }
    }

    /// Runs `call` under the timeout, counting its failure against `parts`.
    async fn call<T, F>(&self, parts: &[usize], call: F) -> Result<T, CheckError>
    where
        F: std::future::Future<Output = Result<T, CheckError>>,
    {
        let limit = self.limit(parts);
        let cause = match tokio::time::timeout(limit, call).await {
            Ok(Ok(value)) => {
                for part in parts {
                    self.breaker(*part).record_success();
                }
                return Ok(value);
            }
            Ok(Err(CheckError::Store(e))) => e,
            Ok(Err(other)) => return Err(other),
            Err(_) => StoreError::Timeout {
                timeout_ms: timeout_ms(limit),
            },
        };
        for part in parts {
            self.failed(*part, &cause).await;
        }
        Err(CheckError::Store(cause))
    }

    async fn decide(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        self.inner.last_now_ns.fetch_max(now_ns, Ordering::Relaxed);
        let part = self.inner.primary.part_of(ScopedKey::plain(key), rule);
        if self.mode_of(part) == Mode::Store {
            let primary = &self.inner.primary;
            let mut result = self
                .call(
                    &[part],
                    primary.apply(ScopedKey::plain(key), rule, op, now_ns),
                )
                .await;
            // A read changes nothing, so a second try cannot count anything twice. A check
            // that charges may have been applied by the try that failed (a timeout does not
            // say whether the store ran it): it is never tried again.
            if matches!(result, Err(CheckError::Store(_))) && read_only(op) {
                result = self
                    .call(
                        &[part],
                        primary.apply(ScopedKey::plain(key), rule, op, now_ns),
                    )
                    .await;
            }
            match result {
                Err(CheckError::Store(cause)) => {
                    return self.fallback(key, rule, op, now_ns, cause)
                }
                other => return other,
            }
        }
        self.fallback(key, rule, op, now_ns, Self::circuit_open())
    }

    fn fallback(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
        cause: StoreError,
    ) -> Result<Outcome, CheckError> {
        let inner = &self.inner;
        let is_decision = matches!(op, Op::Check { .. } | Op::Acquire { .. });
        // An operator's block, unblock, reset, inspect, penalty or reward is never applied
        // to (or read from) the local fallback: it would answer 200 and be lost when the
        // store returns (issue 29: the admin API's penalty and reward).
        let operator = matches!(
            op,
            Op::Block { .. }
                | Op::Unblock
                | Op::Reset
                | Op::Inspect
                | Op::Penalty { .. }
                | Op::Reward { .. }
        );
        if operator {
            return Err(CheckError::Store(StoreError::Unavailable(format!(
                "{cause}; {} was not applied: operator operations never fall back to the \
                 local store",
                op.name()
            ))));
        }
        let outcome = match rule.failure_policy() {
            FailurePolicy::FailOpen if is_decision => Outcome::Decision(open_decision(rule)),
            FailurePolicy::FailClosed if is_decision => {
                note_failed_closed();
                Outcome::Decision(closed_decision(rule, inner.config.probe_interval))
            }
            FailurePolicy::LocalFallback => {
                let share = rule.share(self.fallback_share().instances);
                let outcome = inner.local.apply_now(key, &share, op, now_ns)?;
                if let (Op::Check { cost: cost @ 1.. }, Outcome::Decision(d)) = (op, outcome) {
                    if d.allowed {
                        let part = inner.primary.part_of(ScopedKey::plain(key), rule);
                        self.remember(key, rule, cost, part);
                    }
                }
                outcome
            }
            // Operators' operations (block, reset, inspect, ...) cannot be faked: report.
            _ => return Err(CheckError::Store(cause)),
        };
        inner.fallback_decisions.fetch_add(1, Ordering::Relaxed);
        Ok(outcome)
    }

    /// Remembers local usage for reconciliation.
    fn remember(&self, key: &Key, rule: &Rule, cost: u64, part: usize) {
        if !self.inner.config.reconcile {
            return;
        }
        let mut pending = self
            .inner
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let room = pending.len() < self.inner.config.reconcile_capacity;
        match pending.get_mut(key) {
            Some((_, used, _)) => *used = used.saturating_add(cost),
            None if room => {
                pending.insert(key.clone(), (*rule, cost, part));
            }
            None => {}
        }
    }

    async fn decide_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        self.inner.last_now_ns.fetch_max(now_ns, Ordering::Relaxed);
        let mut parts: Vec<usize> = limits
            .iter()
            .map(|(key, rule)| self.inner.primary.part_of(ScopedKey::plain(key), rule))
            .collect();
        parts.sort_unstable();
        parts.dedup();
        if parts.iter().all(|p| self.mode_of(*p) == Mode::Store) {
            match self
                .call(
                    &parts,
                    self.inner
                        .primary
                        .check_all(ScopedLimits::plain(limits), cost, now_ns),
                )
                .await
            {
                Err(CheckError::Store(_)) => {}
                other => return other,
            }
        }
        self.fallback_all(limits, cost, now_ns)
    }

    /// Several limits while the store is down: any fail-closed limit denies all (nothing is
    /// consumed); fail-open limits allow; local-fallback limits are checked together.
    fn fallback_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        let inner = &self.inner;
        inner.fallback_decisions.fetch_add(1, Ordering::Relaxed);
        let closed = limits
            .iter()
            .any(|(_, r)| r.failure_policy() == FailurePolicy::FailClosed);
        let local: Vec<(Key, Rule)> = limits
            .iter()
            .filter(|(_, r)| r.failure_policy() == FailurePolicy::LocalFallback)
            .map(|(k, r)| (k.clone(), r.share(self.fallback_share().instances)))
            .collect();
        if closed {
            note_failed_closed();
        }
        let local_cost = if closed { 0 } else { cost };
        let mut local_decisions = inner.local.check_all_now(&local, local_cost, now_ns)?;
        let mut local_each = local_decisions.each.drain(..);
        let each: Vec<Decision> = limits
            .iter()
            .map(|(_, rule)| match rule.failure_policy() {
                FailurePolicy::FailClosed => closed_decision(rule, inner.config.probe_interval),
                FailurePolicy::LocalFallback => local_each.next().unwrap_or(open_decision(rule)),
                _ => open_decision(rule),
            })
            .collect();
        let allowed = !closed && local_decisions.allowed;
        if allowed && cost > 0 {
            for (key, rule) in limits
                .iter()
                .filter(|(_, r)| r.failure_policy() == FailurePolicy::LocalFallback)
            {
                let part = inner.primary.part_of(ScopedKey::plain(key), rule);
                self.remember(key, rule, cost, part);
            }
        }
        Ok(Decisions { allowed, each })
    }
}

impl<S: Store> Store for FailoverStore<S> {
    /// Decides on the record's name ([`ScopedKey::record`]): the wrapped store, the local
    /// fallback and reconciliation all see that one key, plain.
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
        self.decide_all(&limits.records(), cost, now_ns).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let limit = self.inner.config.timeout;
        match tokio::time::timeout(limit, self.inner.primary.ping()).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout {
                timeout_ms: timeout_ms(limit),
            }),
        }
    }
}
