//! [`RuleInfo`]: one configured rule as an admin "list rules" shows it, and the [`Format`]
//! it was written in. A leaf of the crate: `block.rs` and `compile.rs` build these, and
//! `ruleset.rs` holds them, without either depending on the other through it.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use weir_core::{FailurePolicy, Rule};

use crate::request::{Limit, RateLimitSpec};

/// Which format a rule was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Format {
    /// envoyproxy/ratelimit's `rate_limit:` block.
    Ratelimit,
    /// Weir's `rule:` block.
    Weir,
}

/// One configured rule, for listing and inspection (the admin API's "list rules").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RuleInfo {
    /// Stable id, unique in the set: ratelimit's stats key, `domain.key_value.key2` (the
    /// value part only when the node has a value). Used as the `rule` metrics label.
    pub id: Arc<str>,
    /// The domain.
    pub domain: Arc<str>,
    /// The descriptor path from the domain root to the rule's node: `(key, value)`, where
    /// `value` is `None` for a key-only (default) node and may end in `*` (a prefix).
    pub path: Vec<(String, Option<String>)>,
    /// The file that defines it.
    pub file: PathBuf,
    /// The format it was written in.
    pub format: Format,
    /// The rule's `name`, if any.
    pub name: Option<Arc<str>>,
    /// Names of the rules this one replaces when both match one request.
    pub replaces: Vec<Arc<str>>,
    /// What the rule does: check a rule, allow (unlimited) or deny (zero requests per unit).
    pub limit: Limit,
    /// The `rate_limit` block as written (ratelimit format only).
    pub rate_limit: Option<RateLimitSpec>,
    /// Cost multiplier applied to every hit.
    pub cost: u64,
    /// Shadow mode.
    pub shadow: bool,
    /// The share of requests, 0 to 100, for which a denial is enforced.
    pub enforce_percent: u8,
    /// ratelimit's `detailed_metric`.
    pub detailed_metric: bool,
    /// ratelimit's `quota_mode`: this rule's denial is enforced only when every quota-mode
    /// descriptor of the request is denied (see [`Matched::quota_mode`](crate::Matched)).
    pub quota_mode: bool,
}

impl RuleInfo {
    /// The rule to check, if any (none when unlimited or denying everything).
    pub fn rule(&self) -> Option<&Rule> {
        self.limit.rule()
    }

    /// The algorithm's name (`fixed_window`, `gcra`, …), `unlimited` or `deny`.
    pub fn algorithm(&self) -> &'static str {
        self.limit.algorithm()
    }

    /// The rule's [`Rule::limit`] (requests per window, capacity, burst, depth or leases);
    /// 0 for a rule that denies everything; `None` when unlimited.
    pub fn capacity(&self) -> Option<u64> {
        match &self.limit {
            Limit::Rule(rule) => Some(rule.limit()),
            Limit::Deny { .. } => Some(0),
            Limit::Unlimited => None,
        }
    }

    /// The rule's window (see [`Rule::window`]); `None` when unlimited.
    pub fn window(&self) -> Option<Duration> {
        match &self.limit {
            Limit::Rule(rule) => Some(rule.window()),
            Limit::Deny { window } => Some(*window),
            Limit::Unlimited => None,
        }
    }

    /// What the rule does when its store cannot decide; `None` without a rule to check.
    pub fn on_failure(&self) -> Option<FailurePolicy> {
        self.rule().map(|r| r.failure_policy())
    }

    /// Whether the rule is `unlimited`.
    pub fn is_unlimited(&self) -> bool {
        matches!(self.limit, Limit::Unlimited)
    }
}
