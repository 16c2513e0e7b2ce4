//! The decide path's second mode: all-or-nothing, for callers that admit or refuse one
//! request as a whole (`weir proxy`). The first mode, [`Engine::decide`] in `decide.rs`,
//! answers each descriptor on its own as Envoy's API wants. Both match against the same rule
//! snapshot, count in the same metrics, honour shadow rules and `enforce_percent` alike, and
//! judge a failing store with one function (a full memory store under rules that fail open
//! lets the request through; anything else is a [`DecideError::Unavailable`], 503, saying
//! why, never a made-up denial).
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

use weir_config::{Descriptor, Limit, Matched};
use weir_core::{
    CheckError, Clock, Decision, Decisions, FailurePolicy, Key, Rule, ScopedLimits, Store,
};

use crate::decide::{deny_all, DecideError};
use crate::engine::Engine;
use crate::metrics::DecisionOutcome;
use crate::rollout::enforced;

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

impl Engine {
    /// Decides a request of `domain` with `descriptors` all-or-nothing, charging `cost`
    /// to each limit that applies (see the module docs).
    pub async fn decide_all<S: AsRef<str>>(
        &self,
        domain: &str,
        descriptors: &[Descriptor<S>],
        cost: u64,
    ) -> Result<AllVerdict, DecideError> {
        // An override names its own limit per descriptor; this mode charges the limits the
        // rule files set, together (weir proxy builds no override): refused, never
        // silently dropped or honoured without its configured rule's guard.
        if let Some(i) = descriptors.iter().position(|d| d.limit.is_some()) {
            return Err(DecideError::Invalid(format!(
                "descriptors[{i}].limit: an all-or-nothing decision takes no limit override"
            )));
        }
        let snapshot = self.rules().snapshot();
        // Descriptors are bounded and domains checked when rules load; should matching
        // still fail, the request is refused: an error here must never mean "no limit".
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
            return Ok(self.blocked(m));
        }
        let checked: Vec<(&Matched, Rule)> = matched
            .iter()
            .filter_map(|m| match m.limit {
                Limit::Rule(rule) => Some((m, rule)),
                _ => None,
            })
            .collect();
        if checked.is_empty() {
            return Ok(AllVerdict::unlimited());
        }
        // One check charges every limit the same cost: a rule that multiplies it (or a
        // descriptor with its own hits) cannot be honoured here, so it is refused, never
        // charged less than it says.
        if let Some((m, _)) = checked.iter().find(|(m, _)| m.hits(cost) != cost) {
            return Err(DecideError::Rule {
                rule: m.rule_id.to_string(),
                reason: "an all-or-nothing check charges every limit the same cost; this \
                         rule's cost (or its descriptor's hits) differs"
                    .into(),
            });
        }
        let limits: Vec<(Key, Rule)> = checked.iter().map(|(m, r)| (m.key.clone(), *r)).collect();
        let Some((mut decisions, failed_closed)) = self.check_all(&limits, &checked, cost).await?
        else {
            // The store failed and every rule fails open.
            return Ok(AllVerdict::unlimited());
        };
        let global_shadow = self.global_shadow();
        let enforced_denial = |i: usize| {
            checked.get(i).is_some_and(|(m, _)| {
                !m.shadow && enforced(&m.key, m.enforce_percent) && !global_shadow
            })
        };
        let denied: Vec<usize> = (0..decisions.each.len())
            .filter(|&i| decisions.each.get(i).is_some_and(|d| !d.allowed))
            .collect();
        let denied_by = denied.iter().copied().find(|&i| enforced_denial(i));
        if !denied.is_empty() && denied_by.is_none() {
            // Only shadow denials: charge the limits that allowed, as if the shadow rules
            // were not there.
            let allowing: Vec<(Key, Rule)> = limits
                .iter()
                .enumerate()
                .filter(|(i, _)| !denied.contains(i))
                .map(|(_, l)| l.clone())
                .collect();
            if !allowing.is_empty() {
                if let Some((charged, _)) = self.check_all(&allowing, &checked, cost).await? {
                    let mut fresh = charged.each.into_iter();
                    for (i, d) in decisions.each.iter_mut().enumerate() {
                        if !denied.contains(&i) {
                            if let Some(f) = fresh.next() {
                                *d = f;
                            }
                        }
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
                if !d.allowed && enforced_denial(i) {
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
            let shadow_denied = !d.allowed && !enforced_denial(i);
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
    ) -> Result<Option<(Decisions, bool)>, DecideError> {
        let limiter = self.limiter();
        let clock = limiter.clock();
        let start_ns = clock.now_ns();
        // What `Limiter::check_all` does, at the instant already read for the timing; the
        // store decides in place when it is the memory store (`AnyStore`).
        let check = limiter
            .store()
            .check_all(ScopedLimits::scoped(limits), cost, start_ns);
        let (result, failed_closed) = if self.store().is_guarded() {
            weir_resilience::noting_failed_closed(check).await
        } else {
            (check.await, false)
        };
        self.metrics().store_call(Duration::from_nanos(
            clock.now_ns().saturating_sub(start_ns),
        ));
        let error = match result {
            Ok(decisions) => return Ok(Some((decisions, failed_closed))),
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
