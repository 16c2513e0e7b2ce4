//! The decision path every API shares: validate → match against the rule snapshot → one
//! limiter check per matched descriptor → shadow and roll-out → metrics → a [`Verdict`].
//! What the APIs add is only parsing and rendering. Its all-or-nothing mode, for
//! `weir proxy`, is `decide_all.rs`; what both share (building, readiness, a failed store) is
//! `engine.rs`.
//!
//! Semantics follow envoyproxy/ratelimit so that Envoy sees the same answers:
//! - each descriptor is checked on its own (a request denied by one descriptor still
//!   counts against the others that allowed it);
//! - a descriptor no rule matches, and any descriptor of an unknown domain, is `OK`;
//! - an `unlimited` rule is `OK` without touching the store, and a `requests_per_unit: 0`
//!   rule is `OVER_LIMIT` without touching it;
//! - hits above a rule's limit are `OVER_LIMIT` (they can never pass: the status says so,
//!   `never_allowed`, and its retry-after is the key's reset, or the rule's window when the
//!   key has nothing to reset, never 0);
//! - a limit override (a descriptor's own `limit`) replaces the configured rule's limit,
//!   counted in a key space of its own, but never its guard: while the rule the
//!   descriptor matches without the override denies everything (`requests_per_unit: 0`)
//!   or holds its key blocked or locked out, the descriptor is `OVER_LIMIT` under that
//!   rule (its record is inspected, never charged; a shadow or rolled-out rule's guard is
//!   not enforced, as its own denials are not). With `--limit-overrides deny` a request
//!   carrying one is refused (`INVALID_ARGUMENT` / 400) instead;
//! - a shadow rule's denial is reported `OK`; under the global shadow mode the descriptor
//!   keeps `OVER_LIMIT` and only the overall code becomes `OK`;
//! - `quota_mode`: a quota descriptor is checked, charged and reported like any other
//!   (`OVER_LIMIT` when denied), but the overall code is `OVER_LIMIT` only if a descriptor
//!   without quota mode is over its limit or *every* quota descriptor of the request is
//!   (one quota descriptor alone is every one); an unlimited descriptor is no quota, and a
//!   shadow or rolled-out denial (reported `OK`) leaves its quota unspent. ratelimit's
//!   global `QUOTA_MODE` setting has no Weir equivalent.
//!
//! A memory store full of limited keys refuses new keys (it evicts unlimited ones first):
//! the rule's failure policy decides. Fail open allows; fail closed (and local fallback,
//! as the memory store has nothing to fall back to) is an error (`503` / `UNAVAILABLE`)
//! that says the store is full, never a made-up denial with an invented `Retry-After`.
//! Each refusal is counted (`store_errors{kind="full"}`), logged (one WARN per 10 s with a
//! count) and turns `/readyz` degraded for 10 s. Any other store failure that the failover
//! guard did not absorb is an error (`503` / `UNAVAILABLE`). A denial the failover guard
//! made because the store is down and the rule fails closed is marked
//! ([`Status::failed_closed`]) and counted as `outcome="failed_closed"`, not `denied`: the
//! APIs say so, and an operator can tell an outage from a limit.

use std::sync::Arc;
use std::time::Duration;

use weir_config::{Descriptor, Limit, MatchError, Matched};
use weir_core::{Algorithm, CheckError, Clock, Decision, FailurePolicy, Key, Rule, StoreError};

use crate::engine::Engine;
use crate::metrics::{DecisionOutcome, NearLimit};
use crate::rollout::enforced;
use crate::settings::LimitOverrides;
use crate::store::LIMIT_OVERRIDE_SHARE_PERCENT;
use crate::verdict::{Code, MatchedRule, Status, Verdict};

/// A rate-limit request in the engine's terms, whatever API it came from. Its strings are
/// `String`s by default; a front end that parsed the request from a buffer may borrow them
/// from it instead (`CheckRequest<Cow<str>>`: `/v1/check` does), so deciding copies none.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckRequest<S = String> {
    /// The domain.
    pub domain: S,
    /// The descriptors.
    pub descriptors: Vec<Descriptor<S>>,
    /// The request's hits addend (`0` counts as 1).
    pub hits_addend: u64,
}

/// Why a request could not be decided. Exhaustive on purpose: each front end maps every
/// kind to its own status (400 / 503, `INVALID_ARGUMENT` / `UNAVAILABLE`, …), and a new
/// kind must not fall into a catch-all there.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecideError {
    /// The request is malformed or over a documented limit (400 / `INVALID_ARGUMENT`).
    #[error("{0}")]
    Invalid(String),
    /// The store failed and no failure policy covered it (503 / `UNAVAILABLE`).
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The matched rule cannot answer a plain check (a concurrency rule takes leases, not
    /// checks): 400 / `FAILED_PRECONDITION`.
    #[error("rule {rule}: {reason}")]
    Rule {
        /// The rule id.
        rule: String,
        /// Why.
        reason: String,
    },
}

impl Engine {
    /// What a store failure means for the request, in both decide modes: `Ok(())` when it
    /// goes through anyway (a full memory store under fail open; `policy` is the rules'
    /// strictest), else the error to answer (503 / `UNAVAILABLE`). Counted and, for a full
    /// store, logged and readiness degraded for a while. `rules` names the rules involved.
    pub(crate) fn store_failed(
        &self,
        error: StoreError,
        policy: FailurePolicy,
        rules: &str,
    ) -> Result<(), DecideError> {
        let metrics = self.metrics();
        match error {
            StoreError::Full { capacity } => {
                metrics.store_error("full");
                let now_ns = self.limiter().clock().now_ns();
                self.capacity().refused(now_ns, capacity, rules);
                match policy {
                    FailurePolicy::FailOpen => Ok(()),
                    // Nothing to fall back to from the embedded store: closed.
                    _ => Err(DecideError::Unavailable(format!(
                        "{error}; rule {rules} fails closed for new keys until some expire"
                    ))),
                }
            }
            // A guarded store applied the rule's policy already: what reaches here had none
            // to apply (and was counted there).
            error => {
                if !self.store().is_guarded() {
                    metrics.store_error(match error {
                        StoreError::Timeout { .. } => "timeout",
                        _ => "error",
                    });
                }
                Err(DecideError::Unavailable(error.to_string()))
            }
        }
    }

    /// Decides one request.
    pub async fn decide<S: AsRef<str>>(
        &self,
        request: &CheckRequest<S>,
    ) -> Result<Verdict, DecideError> {
        let domain = request.domain.as_ref();
        // envoyproxy/ratelimit's own messages for the two basic mistakes.
        if domain.is_empty() {
            return Err(DecideError::Invalid(
                "rate limit domain must not be empty".into(),
            ));
        }
        if request.descriptors.is_empty() {
            return Err(DecideError::Invalid(
                "rate limit descriptor list must not be empty".into(),
            ));
        }
        if self.settings().limit_overrides == LimitOverrides::Deny {
            if let Some(i) = request.descriptors.iter().position(|d| d.limit.is_some()) {
                return Err(DecideError::Invalid(format!(
                    "descriptors[{i}].limit: limit overrides are refused by this server \
                     (--limit-overrides deny); send the descriptor without one"
                )));
            }
        }
        // The request's own addend (each descriptor's is checked by `matches`).
        weir_config::bounds::check_hits_addend(request.hits_addend)
            .map_err(|e| DecideError::Invalid(e.to_string()))?;
        let snapshot = self.rules().snapshot_here();
        let matched = match snapshot.rules.matches(domain, &request.descriptors) {
            Ok(matched) => matched,
            Err(MatchError::UnknownDomain(_)) => {
                // As envoyproxy/ratelimit: no limit applies to an unknown domain.
                for _ in &request.descriptors {
                    snapshot.counters.unknown_domain();
                }
                return Ok(Verdict {
                    overall: Code::Ok,
                    statuses: vec![Status::unmatched(); request.descriptors.len()],
                });
            }
            Err(other) => return Err(DecideError::Invalid(other.to_string())),
        };
        let mut statuses = Vec::with_capacity(matched.len());
        let mut overall = Overall::default();
        // By reference: a match held by value across the decision's `await` would grow its
        // future by its size (see `noted`).
        for m in &matched {
            let Some(m) = m else {
                snapshot.counters.unmatched(domain);
                statuses.push(Status::unmatched());
                continue;
            };
            let status = self.decide_one(domain, m, request.hits_addend).await?;
            let outcome = outcome(&status, self.near());
            snapshot.counters.matched(domain, &m.rule_id, outcome);
            if let Some(decision) = &status.decision {
                snapshot.counters.hits(
                    domain,
                    &m.rule_id,
                    decision,
                    m.hits(request.hits_addend),
                    status.shadow_denied,
                    self.near(),
                );
            }
            overall.add(&status, m.quota_mode);
            statuses.push(status);
        }
        if self.global_shadow() && overall.code(false) == Code::OverLimit {
            // As envoyproxy/ratelimit: a request the global shadow mode let through.
            self.metrics().global_shadow_mode();
        }
        Ok(Verdict {
            overall: overall.code(self.global_shadow()),
            statuses,
        })
    }

    async fn decide_one(
        &self,
        domain: &str,
        m: &Matched,
        request_hits: u64,
    ) -> Result<Status, DecideError> {
        if let Some(configured) = &m.configured {
            // Boxed: only a limit override has a guard, and its future (a store read) would
            // otherwise size every decision's (see `noted`).
            if let Some(denied) = Box::pin(self.guard(configured)).await? {
                self.top_denied()
                    .record(&configured.key, &configured.rule_id);
                return Ok(Status {
                    code: Code::OverLimit,
                    matched: Some(matched_rule(configured)),
                    decision: Some(denied),
                    shadow_denied: self.global_shadow(),
                    never_allowed: false,
                    failed_closed: false,
                });
            }
        }
        // The rule is borrowed and the answer's rule made after the check, so that neither
        // is held across the store's `await` (see `noted`).
        let (decision, never_allowed, failed_closed) = match &m.limit {
            Limit::Rule(rule) => {
                self.check(&m.key, rule, m.hits(request_hits), &m.rule_id)
                    .await?
            }
            Limit::Deny { window } => (
                deny_all(*window, self.limiter().clock().now_ns()),
                false,
                false,
            ),
            // Unlimited (and any kind added later that checks nothing): allowed, no store.
            _ => {
                return Ok(Status {
                    code: Code::Ok,
                    matched: Some(matched_rule(m)),
                    decision: None,
                    shadow_denied: false,
                    never_allowed: false,
                    failed_closed: false,
                })
            }
        };
        let matched = matched_rule(m);
        if decision.allowed {
            return Ok(Status {
                code: Code::Ok,
                matched: Some(matched),
                decision: Some(decision),
                shadow_denied: false,
                never_allowed: false,
                failed_closed: false,
            });
        }
        let rule_enforces = !m.shadow && enforced(&m.key, m.enforce_percent);
        let shadow_denied = !rule_enforces || self.global_shadow();
        self.record_denial(&m.key, &m.rule_id, shadow_denied);
        if shadow_denied {
            tracing::debug!(domain, rule = %m.rule_id, "denial not enforced (shadow or roll-out)");
        }
        if failed_closed {
            tracing::debug!(domain, rule = %m.rule_id, "denied: the store is unavailable and the rule fails closed");
        }
        Ok(Status {
            code: if rule_enforces {
                Code::OverLimit
            } else {
                Code::Ok
            },
            matched: Some(matched),
            decision: Some(decision),
            shadow_denied,
            never_allowed,
            failed_closed,
        })
    }

    /// The guard of the configured rule behind a limit override: a denial when that rule
    /// denies everything, or its record of the key is blocked or locked out (inspected,
    /// never charged, so the configured rule counts nothing the override asked); `None`
    /// when the override may decide. A rule that would not enforce its own denial here
    /// (shadow, roll-out) does not enforce its guard either. When the record cannot be
    /// read, the rule's failure policy decides as for its own checks: fail open or local
    /// fallback (a plain request would be decided without the store's record too) let the
    /// override decide; fail closed is an error (503 / `UNAVAILABLE`), never "no guard".
    async fn guard(&self, configured: &Matched) -> Result<Option<Decision>, DecideError> {
        if configured.shadow || !enforced(&configured.key, configured.enforce_percent) {
            return Ok(None);
        }
        let rule = match configured.limit {
            Limit::Rule(rule) => rule,
            Limit::Deny { window } => {
                let now_ns = self.limiter().clock().now_ns();
                return Ok(Some(deny_all(window, now_ns)));
            }
            // Unlimited (and any kind added later that holds no record): nothing to guard.
            _ => return Ok(None),
        };
        let usage = match self.limiter().inspect(&configured.key, &rule).await {
            Ok(usage) => usage,
            Err(CheckError::Store(error)) => {
                return match rule.failure_policy() {
                    FailurePolicy::FailClosed => Err(DecideError::Unavailable(format!(
                        "{error}; rule {} fails closed and its block or lockout could not \
                         be read for a limit override",
                        configured.rule_id
                    ))),
                    _ => Ok(None),
                };
            }
            Err(other) => {
                return Err(DecideError::Rule {
                    rule: configured.rule_id.to_string(),
                    reason: format!("its block or lockout could not be read: {other}"),
                })
            }
        };
        if usage.blocked_for.is_zero() {
            return Ok(None);
        }
        Ok(Some(Decision {
            allowed: false,
            limit: rule.limit(),
            remaining: 0,
            reset_after: usage.reset_after.max(usage.blocked_for),
            retry_after: usage.blocked_for,
            delay: Duration::ZERO,
        }))
    }

    /// One limiter check, timed, with the errors that are decisions turned into them;
    /// whether the hits are above the rule's capacity (never allowed); and whether it is a
    /// denial made because the store is unavailable and the rule fails closed (noted by
    /// the failover guard: `weir_resilience::noting_failed_closed`).
    async fn check(
        &self,
        key: &Key,
        rule: &Rule,
        hits: u64,
        rule_id: &str,
    ) -> Result<(Decision, bool, bool), DecideError> {
        let clock = self.limiter().clock();
        let start_ns = clock.now_ns();
        let (result, failed_closed) = noted(self.store().is_guarded(), || {
            self.limiter().check_at(key, rule, hits, start_ns)
        })
        .await;
        let took_ns = clock.now_ns().saturating_sub(start_ns);
        self.metrics().store_call(Duration::from_nanos(took_ns));
        let decision = match result {
            Ok(decision) => decision,
            Err(CheckError::CostAboveCapacity { .. }) => {
                // More hits than the limit can ever allow: over the limit, as in ratelimit.
                // No wait makes them pass; the retry-after is for protocols that cannot say
                // "never" (Envoy's): the key's reset, as ratelimit's for a fixed window, or
                // the whole window when nothing is used, never "retry now".
                // Boxed, as a rare path's store call (see `noted`).
                let now = Box::pin(self.limiter().peek(key, rule)).await.ok();
                let reset_after = now.map_or(rule.window(), |d| d.reset_after);
                let retry_after = if reset_after.is_zero() {
                    rule.window()
                } else {
                    reset_after
                };
                let decision = Decision {
                    allowed: false,
                    limit: rule.limit(),
                    remaining: now.map_or(0, |d| d.remaining),
                    reset_after,
                    retry_after,
                    delay: Duration::ZERO,
                };
                return Ok((decision, true, false));
            }
            Err(CheckError::Store(error @ StoreError::Full { .. }))
                if rule.scope() == weir_config::limit_override_scope() =>
            {
                // The limit overrides' own share is full of limited keys: their new keys
                // are refused, and nothing else is (readiness stays: a stream of
                // overrides must not take the server out of rotation).
                self.metrics().store_error("full");
                return Err(DecideError::Unavailable(format!(
                    "{error}: the limit overrides' share of it ({LIMIT_OVERRIDE_SHARE_PERCENT} % \
                     of the capacity) holds only limited keys; overrides for new keys are \
                     refused until some expire (other keys are decided as usual)"
                )));
            }
            Err(CheckError::Store(error)) => {
                self.store_failed(error, rule.failure_policy(), rule_id)?;
                allowed_without_store(rule)
            }
            Err(CheckError::Unsupported { op, algorithm }) => {
                return Err(DecideError::Rule {
                    rule: rule_id.to_string(),
                    reason: if matches!(rule.algorithm(), Algorithm::Concurrency(_)) {
                        "a concurrency rule counts leases, not requests: acquire and release \
                         them over HTTP (POST /v1/acquire, POST /v1/release)"
                            .to_string()
                    } else {
                        format!("{op} is not supported by the {algorithm} algorithm")
                    },
                })
            }
            Err(other) => return Err(DecideError::Invalid(other.to_string())),
        };
        let failed_closed = failed_closed && !decision.allowed;
        Ok((decision, false, failed_closed))
    }
}

/// The answer when a failed store lets a request through (a full memory store, or the
/// store down, under fail open): allowed, nothing counted. `Engine::check_rule` gives it
/// too.
pub(crate) fn allowed_without_store(rule: &Rule) -> Decision {
    Decision {
        allowed: true,
        limit: rule.limit(),
        remaining: 0,
        reset_after: Duration::ZERO,
        retry_after: Duration::ZERO,
        delay: Duration::ZERO,
    }
}

/// `check()`'s output, and whether the failover guard marked it a denial made because the
/// store is down and the rule fails closed (`weir_resilience::noting_failed_closed`;
/// `guarded`: the store has that guard, which only a network store has).
///
/// The noting future holds the check three times over (some 800 bytes), and a future is
/// copied whole at each `await` that takes it in, from the store's up to hyper's. Boxed on
/// the guarded path, where a round trip to the store dwarfs one allocation, it no longer
/// sizes the memory store's decisions: a `/v1/check`'s decision future went from 2.2 KB to
/// 0.6 KB (issue 31, docs/benchmarks-history.md "Decisions' futures").
pub(crate) async fn noted<F: std::future::Future>(
    guarded: bool,
    check: impl FnOnce() -> F,
) -> (F::Output, bool) {
    if guarded {
        Box::pin(weir_resilience::noting_failed_closed(check())).await
    } else {
        (check().await, false)
    }
}

/// The rule of a match, as a status reports it.
fn matched_rule(m: &Matched) -> MatchedRule {
    MatchedRule {
        id: Arc::clone(&m.rule_id),
        name: m.name.clone(),
        limit: m.limit,
        rate_limit: m.rate_limit,
        shadow: m.shadow,
    }
}

/// The decision of a `requests_per_unit: 0` rule (ratelimit's block list): denied until
/// the end of the epoch-aligned window, and again in the next one. `weir proxy` answers
/// such rules the same way.
pub fn deny_all(window: Duration, now_ns: u64) -> Decision {
    let window_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX).max(1);
    let until_end = Duration::from_nanos(window_ns - now_ns % window_ns);
    Decision {
        allowed: false,
        limit: 0,
        remaining: 0,
        reset_after: until_end,
        retry_after: until_end,
        delay: Duration::ZERO,
    }
}

/// The overall code, as envoyproxy/ratelimit combines the descriptors' codes: over the
/// limit iff a descriptor without quota mode is, or every quota-mode descriptor is (an
/// unlimited one is no quota); never under the global shadow mode.
#[derive(Debug, Default)]
struct Overall {
    /// Descriptors without quota mode that are over the limit.
    over: usize,
    /// Quota-mode descriptors (unlimited ones left out).
    quotas: usize,
    /// Quota-mode descriptors over the limit.
    quotas_over: usize,
}

impl Overall {
    fn add(&mut self, status: &Status, quota_mode: bool) {
        let over = usize::from(status.code == Code::OverLimit);
        if quota_mode && !status.is_unlimited() {
            self.quotas += 1;
            self.quotas_over += over;
        } else {
            self.over += over;
        }
    }

    fn code(&self, global_shadow: bool) -> Code {
        let spent = self.quotas > 0 && self.quotas_over == self.quotas;
        if (self.over > 0 || spent) && !global_shadow {
            Code::OverLimit
        } else {
            Code::Ok
        }
    }
}

/// The metrics outcome of a matched descriptor's status.
fn outcome(status: &Status, near: NearLimit) -> DecisionOutcome {
    if status.failed_closed && !status.shadow_denied {
        return DecisionOutcome::FailedClosed;
    }
    DecisionOutcome::with_near_limit(status.decision.as_ref(), status.shadow_denied, near)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(statuses: &[(Code, bool)], global_shadow: bool) -> Code {
        let mut overall = Overall::default();
        for &(code, quota_mode) in statuses {
            let status = Status {
                code,
                ..Status::unmatched()
            };
            overall.add(&status, quota_mode);
        }
        overall.code(global_shadow)
    }

    #[test]
    fn quotas_deny_only_when_all_are_spent() {
        use Code::{Ok as OK, OverLimit as OVER};
        assert_eq!(code(&[(OVER, false), (OK, true)], false), OVER);
        assert_eq!(code(&[(OK, false), (OVER, true)], false), OVER);
        assert_eq!(code(&[(OVER, true), (OK, true)], false), OK);
        assert_eq!(code(&[(OVER, true), (OVER, true)], false), OVER);
        assert_eq!(code(&[(OVER, true), (OVER, true)], true), OK);
        assert_eq!(code(&[(OK, false), (OK, true)], false), OK);
        assert_eq!(code(&[], false), OK);
    }
}
