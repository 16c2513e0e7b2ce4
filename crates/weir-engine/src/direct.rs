//! One check of a rule the caller built itself, not one from the rule files: the RESP
//! front end's `CL.THROTTLE` (redis-cell) and `THROTTLE` (throttlecrab), whose clients
//! send their parameters with every call. It takes the same path as a matched descriptor
//! in `decide.rs` from the limiter on: the store call timed, a failing store judged by
//! [`Engine::store_failed`] (the rule's failure policy; a full memory store under fail
//! open lets the call through), the decision counted in `weir_decisions_total` under the
//! domain `resp` and the rule's name (a bounded label: one per command), and a denial
//! recorded in the top-denied keys. Not here: parsing the command or bounding its
//! parameters (the front end's job), rules, shadow mode or roll-out (a caller's own rule
//! has none).

use std::time::Duration;

use weir_core::{CheckError, Clock, Decision, Key, Rule};

use crate::decide::DecideError;
use crate::engine::Engine;
use crate::metrics::DecisionOutcome;

/// The domain label of decisions made by [`Engine::check_rule`].
pub const DIRECT_DOMAIN: &str = "resp";

impl Engine {
    /// Checks `cost` against `rule` for `key` on the engine's store: one decision, counted
    /// as `name` (the name the rule was built with; a `'static` one, as it is a metrics
    /// label) under the domain [`DIRECT_DOMAIN`]. A store failure is judged as in
    /// [`Engine::decide`]: allowed only when the rule fails open and the store is full,
    /// else [`DecideError::Unavailable`]. A cost above the rule's capacity is
    /// [`DecideError::Invalid`].
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
    /// assert!(engine.check_rule(&key, &rule, 1, "cl.throttle").await?.allowed);
    /// # Ok(()) }
    /// ```
    pub async fn check_rule(
        &self,
        key: &Key,
        rule: &Rule,
        cost: u64,
        name: &'static str,
    ) -> Result<Decision, DecideError> {
        let clock = self.limiter().clock();
        let start_ns = clock.now_ns();
        let result = self.limiter().check(key, rule, cost).await;
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
        let snapshot = self.rules().snapshot();
        let outcome = DecisionOutcome::of(Some(&decision), false);
        snapshot.counters.matched(DIRECT_DOMAIN, name, outcome);
        if !decision.allowed {
            self.top_denied().record(key, &name.into());
        }
        Ok(decision)
    }
}
