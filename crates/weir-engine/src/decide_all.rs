//! The decide path's second mode: all-or-nothing, for callers that admit or refuse one
//! request as a whole (`weir proxy`). The first mode, [`Engine::decide`] in `decide.rs`,
//! answers each descriptor on its own as Envoy's API wants. Both match against the same rule
//! snapshot, count in the same metrics, honour shadow rules and `enforce_percent` alike, and
//! judge a failing store with one function (a full memory store under rules that fail open
//! lets the request through; anything else is a [`DecideError::Unavailable`], 503, saying
//! why, never a made-up denial).
//!
//! Two ways in, one path: [`Engine::decide_all`] awaits the store's check;
//! [`Engine::decide_all_now`] decides in place on the memory store, without a future (the
//! proxy's every request on the default store). Both run `match_all`, the check, then
//! `conclude_all`.
//!
//! A denial made without the store (it is down and a rule fails closed) is no limit the
//! client reached: it is a [`DecideError::Unavailable`] saying so (the proxy's 503), counted
//! as `failed_closed`, as `Engine::decide` marks it in its answer.
//!
//! All-or-nothing: the request's limits are checked together and a denied request consumes
//! nothing anywhere, so waiting and trying again never charges twice. When only shadow or
//! rolled-out rules denied, the limits that allowed are charged, as if those rules were not
//! there.

use std::sync::Arc;
use std::time::Duration;

use smallvec::SmallVec;
use weir_config::{Descriptor, Limit, Matched};
use weir_core::{
    CheckError, Clock, Decision, Decisions, FailurePolicy, Key, Rule, ScopedLimits, Store,
};

use crate::decide::{deny_all, DecideError};
use crate::engine::Engine;
use crate::metrics::DecisionOutcome;
use crate::rollout::enforced;
use crate::rules::Snapshot;

/// A request's few limits, inline (the proxy's two or three): no allocation of their own.
type Inline<T> = SmallVec<[T; 4]>;

/// One limit of an all-or-nothing verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitDecision {
    /// The rule's id (the metrics label and the `RateLimit` header's name).
    pub rule_id: Arc<str>,
    /// The key the rule counted.
    pub key: Key,
    /// The rule's window.
    pub window: Duration,
    /// The decision.
    pub decision: Decision,
}

/// The answer of [`Engine::decide_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllVerdict {
    /// Whether the request may go: no enforced limit denied it.
    pub allowed: bool,
    /// Each limit that applied, in match order.
    pub limits: Vec<LimitDecision>,
    /// The first enforced denial, an index into `limits`.
    pub denied_by: Option<usize>,
    /// A `requests_per_unit: 0` rule matched (a block list): waiting will not help.
    pub blocked: bool,
}

impl AllVerdict {
    fn unlimited() -> Self {
        Self {
            allowed: true,
            limits: Vec::new(),
            denied_by: None,
            blocked: false,
        }
    }
}

/// A request's matched limits before the store's check: a verdict already, or the
/// limits to check.
enum Matching {
    /// Nothing to check: no limit applies, or a block list denies.
    Done(AllVerdict),
    /// Every match (at least one with a rule), and the rules they were matched in.
    Check(Arc<Snapshot>, Vec<Matched>),
}

/// What the store answered a check: its decisions and whether a denial among them was
/// made because the store is down and a rule fails closed; `None` when a failed store
/// lets the request through.
type Checked = Option<(Decisions, bool)>;

impl Engine {
    /// Decides a request of `domain` with `descriptors` all-or-nothing, charging `cost`
    /// to each limit that applies (see the module docs).
    pub async fn decide_all<S: AsRef<str>>(
        &self,
        domain: &str,
        descriptors: &[Descriptor<S>],
        cost: u64,
    ) -> Result<AllVerdict, DecideError> {
        let (snapshot, matched) = match self.match_all(domain, descriptors, cost)? {
            Matching::Done(verdict) => return Ok(verdict),
            Matching::Check(snapshot, matched) => (snapshot, matched),
        };
        let checked = checked_of(&matched);
        let limits = limits_of(&checked);
        let first = self.check_all(&limits, &checked, cost).await?;
        let again = match self.shadow_only(&limits, &checked, first.as_ref()) {
            Some(allowing) => self.check_all(&allowing, &checked, cost).await?,
            None => None,
        };
        self.conclude_all(&snapshot, domain, &checked, first, again, cost)
    }

    /// [`Engine::decide_all`] decided now, without a future, when the store decides in
    /// place (the embedded memory store); `None` for a network store, whose check is
    /// awaited. The same matching, check and verdict: only the waiting differs.
    pub fn decide_all_now<S: AsRef<str>>(
        &self,
        domain: &str,
        descriptors: &[Descriptor<S>],
        cost: u64,
    ) -> Option<Result<AllVerdict, DecideError>> {
        let store = self.store().memory()?;
        let decided = (|| {
            let (snapshot, matched) = match self.match_all(domain, descriptors, cost)? {
                Matching::Done(verdict) => return Ok(verdict),
                Matching::Check(snapshot, matched) => (snapshot, matched),
            };
            let checked = checked_of(&matched);
            let limits = limits_of(&checked);
            let check = |limits: &[(Key, Rule)]| {
                let clock = self.limiter().clock();
                let start_ns = clock.now_ns();
                let result = store.check_all_scoped_now(limits, cost, start_ns);
                self.checked_all(result, start_ns, &checked)
            };
            let first = check(&limits)?;
            let again = match self.shadow_only(&limits, &checked, first.as_ref()) {
                Some(allowing) => check(&allowing)?,
                None => None,
            };
            self.conclude_all(&snapshot, domain, &checked, first, again, cost)
        })();
        Some(decided)
    }

    /// Matches the descriptors: refused when one carries a limit override or a rule
    /// charges another cost than `cost`; a block list's denial or "no limit" when that is
    /// the answer; else the matches to check.
    fn match_all<S: AsRef<str>>(
        &self,
        domain: &str,
        descriptors: &[Descriptor<S>],
        cost: u64,
    ) -> Result<Matching, DecideError> {
        // An override names its own limit per descriptor; this mode charges the limits the
        // rule files set, together (weir proxy builds no override): refused, never
        // silently dropped or honoured without its configured rule's guard.
        if let Some(i) = descriptors.iter().position(|d| d.limit.is_some()) {
            return Err(DecideError::Invalid(format!(
                "descriptors[{i}].limit: an all-or-nothing decision takes no limit override"
            )));
        }
        // Descriptors are bounded and domains checked when rules load; should matching
        // still fail, the request is refused: an error here must never mean "no limit".
        let snapshot = self.rules().snapshot_here();
        let matched: Vec<Matched> = snapshot
            .rules
            .matches(domain, descriptors)
            .map_err(|e| DecideError::Invalid(format!("the request could not be matched: {e}")))?
            .into_iter()
            .flatten()
            .collect();
        if let Some(m) = matched
            .iter()
            .find(|m| matches!(m.limit, Limit::Deny { .. }))
        {
            return Ok(Matching::Done(self.blocked(m)));
        }
        let mut checked = matched
            .iter()
            .filter(|m| matches!(m.limit, Limit::Rule(_)))
            .peekable();
        if checked.peek().is_none() {
            return Ok(Matching::Done(AllVerdict::unlimited()));
        }
        // One check charges every limit the same cost: a rule that multiplies it (or a
        // descriptor with its own hits) cannot be honoured here, so it is refused, never
        // charged less than it says.
        if let Some(m) = checked.find(|m| m.hits(cost) != cost) {
            return Err(DecideError::Rule {
                rule: m.rule_id.to_string(),
                reason: "an all-or-nothing check charges every limit the same cost; this \
                         rule's cost (or its descriptor's hits) differs"
                    .into(),
            });
        }
        Ok(Matching::Check(snapshot, matched))
    }

    /// Whether the `i`th checked limit's denial is enforced (not a shadow rule's, rolled
    /// out to the key, and the engine not in shadow mode).
    fn enforced_denial(&self, checked: &[(&Matched, Rule)], i: usize) -> bool {
        checked.get(i).is_some_and(|(m, _)| {
            !m.shadow && enforced(&m.key, m.enforce_percent) && !self.global_shadow()
        })
    }

    /// When only shadow (or rolled-out) rules denied: the limits that allowed, to charge
    /// as if those rules were not there. `None` otherwise.
    fn shadow_only(
        &self,
        limits: &[(Key, Rule)],
        checked: &[(&Matched, Rule)],
        first: Option<&(Decisions, bool)>,
    ) -> Option<Inline<(Key, Rule)>> {
        let (decisions, _) = first?;
        let denied = |i: usize| decisions.each.get(i).is_some_and(|d| !d.allowed);
        let mut denials = (0..decisions.each.len()).filter(|&i| denied(i)).peekable();
        denials.peek()?;
        if denials.any(|i| self.enforced_denial(checked, i)) {
            return None;
        }
        let allowing: Inline<(Key, Rule)> = limits
            .iter()
            .enumerate()
            .filter(|(i, _)| !denied(*i))
            .map(|(_, l)| l.clone())
            .collect();
        (!allowing.is_empty()).then_some(allowing)
    }

    /// The verdict from the store's answers: `first` for every limit, `again` (the limits
    /// that allowed, charged after only shadow rules denied) in their place. Counts every
    /// limit in the metrics and notes denials.
    fn conclude_all(
        &self,
        snapshot: &Snapshot,
        domain: &str,
        checked: &[(&Matched, Rule)],
        first: Checked,
        again: Checked,
        cost: u64,
    ) -> Result<AllVerdict, DecideError> {
        let Some((mut decisions, failed_closed)) = first else {
            // The store failed and every rule fails open.
            return Ok(AllVerdict::unlimited());
        };
        let denied =
            |i: usize, decisions: &Decisions| decisions.each.get(i).is_some_and(|d| !d.allowed);
        let denied_by = (0..decisions.each.len())
            .find(|&i| denied(i, &decisions) && self.enforced_denial(checked, i));
        if let Some((charged, _)) = again {
            let was_denied: Inline<bool> = (0..decisions.each.len())
                .map(|i| denied(i, &decisions))
                .collect();
            let mut fresh = charged.each.into_iter();
            for (d, was_denied) in decisions.each.iter_mut().zip(was_denied) {
                if !was_denied {
                    if let Some(f) = fresh.next() {
                        *d = f;
                    }
                }
            }
        }
        let counters = &snapshot.counters;
        if failed_closed && denied_by.is_some() {
            // Denied without the store (it is down and a rule fails closed): not a limit the
            // client reached, so not a 429 with a made-up Retry-After, but the outage said
            // as such (503), counted as `failed_closed`, nothing charged.
            let mut rules = Vec::new();
            for (i, ((m, _), d)) in checked.iter().zip(&decisions.each).enumerate() {
                if !d.allowed && self.enforced_denial(checked, i) {
                    counters.matched(domain, &m.rule_id, DecisionOutcome::FailedClosed);
                    rules.push(&*m.rule_id);
                }
            }
            return Err(DecideError::Unavailable(format!(
                "the store is unavailable and {} fails closed",
                rules.join(", ")
            )));
        }
        for (i, ((m, _), d)) in checked.iter().zip(&decisions.each).enumerate() {
            let shadow_denied = !d.allowed && !self.enforced_denial(checked, i);
            let outcome = DecisionOutcome::with_near_limit(Some(d), shadow_denied, self.near());
            counters.matched(domain, &m.rule_id, outcome);
            counters.hits(domain, &m.rule_id, d, cost, shadow_denied, self.near());
            if !d.allowed {
                self.record_denial(&m.key, &m.rule_id, shadow_denied);
            }
        }
        let limits = checked
            .iter()
            .zip(decisions.each)
            .map(|((m, rule), decision)| LimitDecision {
                rule_id: Arc::clone(&m.rule_id),
                key: m.key.clone(),
                window: rule.window(),
                decision,
            })
            .collect();
        Ok(AllVerdict {
            allowed: denied_by.is_none(),
            limits,
            denied_by,
            blocked: false,
        })
    }

    /// One all-or-nothing check, timed, and whether a denial in it was made because the
    /// store is unavailable and a rule fails closed (noted by the failover guard, as for
    /// [`Engine::decide`]). `None` when a failed store lets the request through (the same
    /// judgement as `Engine::decide`'s: `Engine::store_failed`).
    async fn check_all(
        &self,
        limits: &[(Key, Rule)],
        checked: &[(&Matched, Rule)],
        cost: u64,
    ) -> Result<Checked, DecideError> {
        let limiter = self.limiter();
        let start_ns = limiter.clock().now_ns();
        // What `Limiter::check_all` does, at the instant already read for the timing; the
        // store decides in place when it is the memory store (`AnyStore`).
        let (result, failed_closed) = crate::decide::noted(self.store().is_guarded(), || {
            limiter
                .store()
                .check_all(ScopedLimits::scoped(limits), cost, start_ns)
        })
        .await;
        self.checked_all(result, start_ns, checked)
            .map(|answer| answer.map(|(decisions, _)| (decisions, failed_closed)))
    }

    /// The store's answer to a check begun at `start_ns`, timed in the metrics; a failure
    /// judged by the rules' strictest policy ([`Engine::store_failed`]).
    fn checked_all(
        &self,
        result: Result<Decisions, CheckError>,
        start_ns: u64,
        checked: &[(&Matched, Rule)],
    ) -> Result<Checked, DecideError> {
        let now_ns = self.limiter().clock().now_ns();
        self.metrics()
            .store_call(Duration::from_nanos(now_ns.saturating_sub(start_ns)));
        let error = match result {
            Ok(decisions) => return Ok(Some((decisions, false))),
            Err(CheckError::Store(error)) => error,
            Err(other) => return Err(DecideError::Invalid(other.to_string())),
        };
        let rule_ids: Vec<&str> = checked.iter().map(|(m, _)| &*m.rule_id).collect();
        let policy = FailurePolicy::strictest(checked.iter().map(|(_, r)| r.failure_policy()));
        self.store_failed(error, policy, &rule_ids.join(", "))?;
        Ok(None)
    }

    /// A `requests_per_unit: 0` rule: denied until its window ends.
    fn blocked(&self, m: &Matched) -> AllVerdict {
        let window = match m.limit {
            Limit::Deny { window } => window,
            _ => Duration::from_secs(1),
        };
        let now_ns = self.limiter().clock().now_ns();
        AllVerdict {
            allowed: false,
            limits: vec![LimitDecision {
                rule_id: Arc::clone(&m.rule_id),
                key: m.key.clone(),
                window,
                decision: deny_all(window, now_ns),
            }],
            denied_by: Some(0),
            blocked: true,
        }
    }
}

/// The matches with a rule, each with its rule: the limits a check charges.
fn checked_of(matched: &[Matched]) -> Inline<(&Matched, Rule)> {
    matched
        .iter()
        .filter_map(|m| match m.limit {
            Limit::Rule(rule) => Some((m, rule)),
            _ => None,
        })
        .collect()
}

/// The keys and rules a check charges.
fn limits_of(checked: &[(&Matched, Rule)]) -> Inline<(Key, Rule)> {
    checked.iter().map(|(m, r)| (m.key.clone(), *r)).collect()
}
