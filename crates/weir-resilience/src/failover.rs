//! [`FailoverStore`]: a store wrapper that keeps limiting when the shared store fails. Sits
//! between the [`Limiter`](weir_core::Limiter) (or the over-limit cache) and a network store.
//! Each call gets a timeout; consecutive failures open a circuit; while it is open each
//! rule's [`FailurePolicy`] decides without touching the store; a background PING probe
//! closes it again. A fail-closed denial is marked for a caller that notes it
//! (`failed_closed.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use weir_core::{
    CheckError, Decision, Decisions, FailurePolicy, Key, MemoryStore, Op, Outcome, Rule, Store,
    StoreError,
};

use crate::breaker::{Breaker, Mode};
use crate::failed_closed::note_failed_closed;

/// How a [`FailoverStore`] guards its store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailoverConfig {
    /// The longest one store call may take before it counts as failed (default 50 ms).
    pub timeout: Duration,
    /// Consecutive failures that open the circuit (default 3).
    pub failure_threshold: u32,
    /// How often the probe PINGs a store that is down (default 250 ms).
    pub probe_interval: Duration,
    /// How many instances share each limit: the local fallback allows each its share,
    /// `limit / instances` ([`Rule::share`]). Default 1.
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
            timeout: Duration::from_millis(50),
            failure_threshold: 3,
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
    /// Where decisions are made now.
    pub mode: Mode,
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
    inner: Arc<Inner<S>>,
}

impl<S> Clone for FailoverStore<S> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

#[derive(Debug)]
struct Inner<S> {
    primary: S,
    local: MemoryStore,
    config: FailoverConfig,
    breaker: Breaker,
    probing: AtomicBool,
    last_now_ns: AtomicU64,
    pending: Mutex<HashMap<Key, (Rule, u64)>>,
    store_errors: AtomicU64,
    store_timeouts: AtomicU64,
    fallback_decisions: AtomicU64,
    reconciled_keys: AtomicU64,
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

fn timeout_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl<S: Store> FailoverStore<S> {
    /// Guards `primary` with `config`.
    pub fn new(primary: S, config: FailoverConfig) -> Self {
        Self {
            inner: Arc::new(Inner {
                primary,
                local: MemoryStore::default(),
                config,
                breaker: Breaker::default(),
                probing: AtomicBool::new(false),
                last_now_ns: AtomicU64::new(0),
                pending: Mutex::new(HashMap::new()),
                store_errors: AtomicU64::new(0),
                store_timeouts: AtomicU64::new(0),
                fallback_decisions: AtomicU64::new(0),
                reconciled_keys: AtomicU64::new(0),
            }),
        }
    }

    /// The guarded store.
    pub fn primary(&self) -> &S {
        &self.inner.primary
    }

    /// Where decisions are made now.
    pub fn mode(&self) -> Mode {
        self.inner.breaker.mode()
    }

    /// Counters for metrics.
    pub fn stats(&self) -> FailoverStats {
        let i = &self.inner;
        FailoverStats {
            mode: i.breaker.mode(),
            mode_changes: i.breaker.mode_changes(),
            store_errors: i.store_errors.load(Ordering::Relaxed),
            store_timeouts: i.store_timeouts.load(Ordering::Relaxed),
            fallback_decisions: i.fallback_decisions.load(Ordering::Relaxed),
            reconciled_keys: i.reconciled_keys.load(Ordering::Relaxed),
        }
    }

    /// Records a failed call; opens the circuit (and starts the probe) at the threshold.
    fn failed(&self, cause: &StoreError) {
        let inner = &self.inner;
        match cause {
            StoreError::Timeout { .. } => inner.store_timeouts.fetch_add(1, Ordering::Relaxed),
            _ => inner.store_errors.fetch_add(1, Ordering::Relaxed),
        };
        if inner.breaker.record_failure(inner.config.failure_threshold) {
            tracing::warn!(
                error = %cause,
                failures = inner.config.failure_threshold,
                "store failing: decisions fall back to each rule's failure policy"
            );
            self.start_probe();
        }
    }

    fn circuit_open() -> StoreError {
        StoreError::Unavailable(
            "circuit open: the store is failing, waiting for it to answer".into(),
        )
    }

    async fn call<T, F>(&self, call: F) -> Result<T, CheckError>
    where
        F: std::future::Future<Output = Result<T, CheckError>>,
    {
        let limit = self.inner.config.timeout;
        let cause = match tokio::time::timeout(limit, call).await {
            Ok(Ok(value)) => {
                self.inner.breaker.record_success();
                return Ok(value);
            }
            Ok(Err(CheckError::Store(e))) => e,
            Ok(Err(other)) => return Err(other),
            Err(_) => StoreError::Timeout {
                timeout_ms: timeout_ms(limit),
            },
        };
        self.failed(&cause);
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
        if self.mode() == Mode::Store {
            match self
                .call(self.inner.primary.apply(key, rule, op, now_ns))
                .await
            {
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
                let share = rule.share(inner.config.instances);
                let outcome = inner.local.apply_now(key, &share, op, now_ns)?;
                if let (Op::Check { cost: cost @ 1.. }, Outcome::Decision(d)) = (op, outcome) {
                    if d.allowed {
                        self.remember(key, rule, cost);
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
    fn remember(&self, key: &Key, rule: &Rule, cost: u64) {
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
            Some((_, used)) => *used = used.saturating_add(cost),
            None if room => {
                pending.insert(key.clone(), (*rule, cost));
            }
            None => {}
        }
    }

    fn start_probe(&self) {
        let inner = &self.inner;
        if inner.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to probe from: go back to trying the store (with its timeout).
            inner.probing.store(false, Ordering::Release);
            inner.breaker.close();
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let interval = inner.config.probe_interval;
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(inner) = weak.upgrade() else {
                    return; // the store was dropped
                };
                let store = FailoverStore { inner };
                let answered =
                    tokio::time::timeout(store.inner.config.timeout, store.inner.primary.ping())
                        .await;
                if matches!(answered, Ok(Ok(()))) {
                    store.reconcile().await;
                    store.inner.probing.store(false, Ordering::Release);
                    if store.inner.breaker.close() {
                        tracing::info!("store answers again: decisions return to it");
                    }
                    return;
                }
            }
        });
    }

    /// Pushes usage counted locally during the outage to the store, as penalties.
    async fn reconcile(&self) {
        let pending: Vec<(Key, (Rule, u64))> = {
            let mut map = self
                .inner
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            map.drain().collect()
        };
        let now_ns = self.inner.last_now_ns.load(Ordering::Relaxed);
        let mut pushed = 0u64;
        for (key, (rule, n)) in pending {
            let push = self
                .inner
                .primary
                .apply(&key, &rule, Op::Penalty { n }, now_ns);
            if matches!(
                tokio::time::timeout(self.inner.config.timeout, push).await,
                Ok(Ok(_))
            ) {
                pushed += 1;
            }
        }
        if pushed > 0 {
            self.inner
                .reconciled_keys
                .fetch_add(pushed, Ordering::Relaxed);
            tracing::info!(keys = pushed, "outage usage reconciled into the store");
        }
    }

    async fn decide_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        self.inner.last_now_ns.fetch_max(now_ns, Ordering::Relaxed);
        if self.mode() == Mode::Store {
            match self
                .call(self.inner.primary.check_all(limits, cost, now_ns))
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
            .map(|(k, r)| (k.clone(), r.share(inner.config.instances)))
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
                self.remember(key, rule, cost);
            }
        }
        Ok(Decisions { allowed, each })
    }
}

impl<S: Store> Store for FailoverStore<S> {
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
        self.decide_all(limits, cost, now_ns)
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
