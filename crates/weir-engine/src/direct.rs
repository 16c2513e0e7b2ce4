//! One check of a rule the caller built itself, not one from the rule files: the RESP
//! front end's `CL.THROTTLE` (redis-cell) and `THROTTLE` (throttlecrab), whose clients
//! send their parameters with every call. It takes the same path as a matched descriptor
//! in `decide.rs` from the limiter on: the store call timed, a failing store judged by
//! [`Engine::store_failed`] (the rule's failure policy; a full memory store under fail
//! open lets the call through; a denial the failover guard makes because the store is
//! down and the rule fails closed is noted as such, [`RuleDecision::failed_closed`], and
//! counted as `outcome="failed_closed"`, as `decide` does), the decision counted in
//! `weir_decisions_total` under the domain `resp` and the rule's name (a bounded label: one
//! per command), and a denial recorded in the top-denied keys. Not here: parsing the command or bounding its
//! parameters (the front end's job), rules, shadow mode or roll-out (a caller's own rule
//! has none).
//!
//! A RESP front end decides hundreds of thousands of commands a second, pipelined: what a
//! rule-file decision takes per request (the rule snapshot, counters found by rule id) a
//! command does not need. The [`DIRECT_RULES`] keep their counters and their top-denied
//! names in the engine (`metrics/direct.rs`), so a decision takes no lock,
//! clones no `Arc` and allocates nothing beyond the store's own work.

use std::time::Duration;

use weir_core::{CheckError, Clock, Decision, Key, Rule};

use crate::decide::DecideError;
use crate::engine::Engine;
use crate::metrics::{DecisionOutcome, DIRECT_DOMAIN, DIRECT_RULES};

/// The answer of [`Engine::check_rule`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleDecision {
    /// The decision.
    pub decision: Decision,
    /// A denial made without the store: it is unavailable and the rule fails closed (no
    /// limit was reached). As `Status::failed_closed` in [`Engine::decide`]'s answer.
    pub failed_closed: bool,
}

impl Engine {
    /// Checks `cost` against `rule` for `key` on the engine's store: one decision, counted
    /// as `name` (the name the rule was built with; a `'static` one, as it is a metrics
    /// label) under the domain [`DIRECT_DOMAIN`]. A store failure is judged as in
    /// [`Engine::decide`]: allowed only when the rule fails open and the store is full,
    /// else [`DecideError::Unavailable`]; behind the failover guard, the rule's failure
    /// policy decides (a fail-closed denial is marked [`RuleDecision::failed_closed`]). A cost
    /// above the rule's capacity is [`DecideError::Invalid`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use weir_core::{Key, Rule};
    /// use weir_engine::{Engine, EngineSettings};
    ///
    /// let engine = Engine::open(EngineSettings::default()).await?;
    /// let rule = Rule::gcra(1, Duration::from_secs(1), 2)?.named("cl.throttle");
    /// let key = Key::new("=user1")?;
    /// let checked = engine.check_rule(&key, &rule, 1, "cl.throttle").await?;
    /// assert!(checked.decision.allowed && !checked.failed_closed);
    /// # Ok(()) }
    /// ```
    pub async fn check_rule(
        &self,
        key: &Key,
        rule: &Rule,
        cost: u64,
        name: &'static str,
    ) -> Result<RuleDecision, DecideError> {
        let clock = self.limiter().clock();
        let start_ns = clock.now_ns();
        let (result, failed_closed) = crate::decide::noted(self.store().is_guarded(), || {
            self.limiter().check_at(key, rule, cost, start_ns)
        })
        .await;
        let took_ns = clock.now_ns().saturating_sub(start_ns);
        self.metrics().store_call(Duration::from_nanos(took_ns));
        let decision = match result {
            Ok(decision) => decision,
            Err(CheckError::Store(error)) => {
                self.store_failed(error, rule.failure_policy(), name)?;
                crate::decide::allowed_without_store(rule)
            }
            Err(other) => return Err(DecideError::Invalid(other.to_string())),
        };
        let failed_closed = failed_closed && !decision.allowed;
        let outcome = if failed_closed {
            tracing::debug!(
                rule = name,
                "denied: the store is unavailable and the rule fails closed"
            );
            DecisionOutcome::FailedClosed
        } else {
            DecisionOutcome::of(Some(&decision), false)
        };
        let direct = self.direct();
        let row = DIRECT_RULES.iter().position(|&r| r == name);
        let counted = row.is_some_and(|row| direct.count(self.metrics(), row, outcome));
        if !counted {
            let snapshot = self.rules().snapshot();
            snapshot.counters.matched(DIRECT_DOMAIN, name, outcome);
        }
        if !decision.allowed {
            match row.and_then(|row| direct.names.get(row)) {
                Some(rule) => self.top_denied().record(key, rule),
                None => self.top_denied().record(key, &name.into()),
            }
        }
        Ok(RuleDecision {
            decision,
            failed_closed,
        })
    }
}
