//! The counters and top-denied names of the rules the RESP front end checks itself
//! (`CL.THROTTLE`, `THROTTLE`: `direct.rs`, [`Engine::check_rule`](crate::Engine::check_rule)),
//! kept by the engine so that such a decision, hundreds of thousands a second, takes no
//! rule snapshot, no lock and no `Arc` clone: each counter is looked up in the decisions
//! family once, at its (rule, outcome)'s first decision, then counted in place.

use std::sync::{Arc, OnceLock};

use prometheus_client::metrics::counter::Counter;

use super::{DecisionOutcome, Metrics};

/// The domain label of decisions made by [`Engine::check_rule`](crate::Engine::check_rule).
pub const DIRECT_DOMAIN: &str = "resp";

/// The names the RESP front end checks its own rules under (`CL.THROTTLE`, `THROTTLE`):
/// the dashboard's history draws their decisions beside the rule files' (a name outside
/// this list is counted in the metrics, not drawn).
pub const DIRECT_RULES: [&str; 2] = ["cl.throttle", "throttle"];

/// The decision counters and top-denied names of the [`DIRECT_RULES`], one row each: a
/// counter is looked up in the decisions family at its (rule, outcome)'s first decision,
/// then counted in place (a series still appears only once it has counted, and is the
/// family's own: scrapes and the dashboard's history read it there).
#[derive(Debug)]
pub(crate) struct DirectCounters {
    counters: [[OnceLock<Counter>; DecisionOutcome::RULE_OUTCOMES.len()]; DIRECT_RULES.len()],
    pub(crate) names: [Arc<str>; DIRECT_RULES.len()],
}

impl DirectCounters {
    pub(crate) fn new() -> Self {
        Self {
            counters: Default::default(),
            names: DIRECT_RULES.map(Arc::from),
        }
    }

    /// Counts one decision of `DIRECT_RULES[row]`; false when `outcome` has no counter
    /// here (the caller counts it the general way).
    pub(crate) fn count(&self, metrics: &Metrics, row: usize, outcome: DecisionOutcome) -> bool {
        let slot = DecisionOutcome::RULE_OUTCOMES
            .iter()
            .position(|&o| o == outcome);
        let cell = self.counters.get(row).zip(slot).and_then(|(r, i)| r.get(i));
        let Some((cell, rule)) = cell.zip(DIRECT_RULES.get(row)) else {
            return false;
        };
        cell.get_or_init(|| metrics.decision_counter(DIRECT_DOMAIN, rule, outcome))
            .inc();
        true
    }
}
