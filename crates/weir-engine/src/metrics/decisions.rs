//! The decision counters: the [`DecisionOutcome`] label and [`RuleCounters`], the counters of one
//! rule snapshot, pre-built so that counting a decision finds its counter by rule id
//! without allocating. Built by `Metrics::rule_counters` with each snapshot.

use foldhash::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use super::hits::{HitFamilies, RuleHits};

/// The domain label of a request whose domain no rule file defines.
pub const UNKNOWN_DOMAIN: &str = "_unknown";

/// What happened to one descriptor: the `outcome` label of `weir_decisions_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionOutcome {
    /// Allowed, with more than 20% of the limit left.
    Allowed,
    /// Allowed, with 20% of the limit or less left (envoyproxy/ratelimit's `near_limit`).
    NearLimit,
    /// Denied and enforced.
    Denied,
    /// Denied by the limiter but not enforced: shadow mode (per rule or global) or outside
    /// the rule's enforcement percentage.
    ShadowDenied,
    /// Matched an `unlimited` rule.
    Unlimited,
    /// Denied and enforced without the store: it is unavailable and the rule fails closed
    /// (no limit was reached).
    FailedClosed,
    /// Matched no rule (allowed).
    NoRule,
}

impl DecisionOutcome {
    pub(crate) const RULE_OUTCOMES: [DecisionOutcome; 6] = [
        DecisionOutcome::Allowed,
        DecisionOutcome::NearLimit,
        DecisionOutcome::Denied,
        DecisionOutcome::ShadowDenied,
        DecisionOutcome::Unlimited,
        DecisionOutcome::FailedClosed,
    ];

    /// The outcome of one limit's decision: `None` for an unlimited rule (no decision),
    /// `shadow_denied` when its denial is not enforced, `near_limit` past 80% of the limit
    /// (envoyproxy/ratelimit's near-limit ratio).
    pub fn of(decision: Option<&weir_core::Decision>, shadow_denied: bool) -> DecisionOutcome {
        Self::with_near_limit(decision, shadow_denied, NearLimit::DEFAULT)
    }

    /// [`DecisionOutcome::of`] with another near-limit threshold.
    pub fn with_near_limit(
        decision: Option<&weir_core::Decision>,
        shadow_denied: bool,
        near: NearLimit,
    ) -> DecisionOutcome {
        match decision {
            None => DecisionOutcome::Unlimited,
            Some(_) if shadow_denied => DecisionOutcome::ShadowDenied,
            Some(d) if !d.allowed => DecisionOutcome::Denied,
            Some(d) if near.reached(d.limit, d.limit.saturating_sub(d.remaining)) => {
                DecisionOutcome::NearLimit
            }
            Some(_) => DecisionOutcome::Allowed,
        }
    }

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionOutcome::Allowed => "allowed",
            DecisionOutcome::NearLimit => "near_limit",
            DecisionOutcome::Denied => "denied",
            DecisionOutcome::ShadowDenied => "shadow_denied",
            DecisionOutcome::Unlimited => "unlimited",
            DecisionOutcome::FailedClosed => "failed_closed",
            DecisionOutcome::NoRule => "no_rule",
        }
    }
}

/// The share of a limit past which a decision is `near_limit`: envoyproxy/ratelimit's
/// `NEAR_LIMIT_RATIO` (default 0.8), kept in millionths so the decision path does integer
/// arithmetic only. A limit is near once more than `floor(limit × ratio)` is used, as
/// ratelimit's threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NearLimit {
    ppm: u64,
}

impl NearLimit {
    /// 0.8.
    pub const DEFAULT: NearLimit = NearLimit { ppm: 800_000 };

    /// The threshold of `ratio`, clamped to 0..=1 (a NaN is the default).
    pub fn new(ratio: f64) -> NearLimit {
        if ratio.is_nan() {
            return Self::DEFAULT;
        }
        let ppm = (ratio.clamp(0.0, 1.0) * 1_000_000.0).round();
        // In 0..=1e6 after the clamp: the cast is exact.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let ppm = ppm as u64;
        NearLimit { ppm }
    }

    /// `floor(limit × ratio)`: hits past it are near the limit.
    pub fn threshold(self, limit: u64) -> u64 {
        let t = u128::from(limit) * u128::from(self.ppm) / 1_000_000;
        u64::try_from(t).unwrap_or(u64::MAX)
    }

    /// Whether `used` of `limit` is past the threshold.
    pub fn reached(self, limit: u64, used: u64) -> bool {
        used > self.threshold(limit)
    }
}

impl Default for NearLimit {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl EncodeLabelValue for DecisionOutcome {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        encoder.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct DecisionLabels {
    pub(crate) domain: String,
    pub(crate) rule: String,
    pub(crate) outcome: DecisionOutcome,
}

/// Decision counters for one rule snapshot: found by rule id without allocating. The maps
/// are built once per snapshot from the rule files' ids, then only looked up (by the rule a
/// request matched), on every decision. A request chooses which key is looked up, never
/// what a map holds (no chain to flood), so foldhash (seeded) serves; SipHash took 1.4k
/// instructions a request.
#[derive(Debug, Clone)]
pub struct RuleCounters {
    pub(crate) by_rule: HashMap<Arc<str>, [Counter; 6]>,
    pub(crate) no_rule: HashMap<Arc<str>, Counter>,
    pub(crate) unknown_domain: Counter,
    pub(crate) family: Family<DecisionLabels, Counter>,
    pub(crate) hits: HashMap<Arc<str>, RuleHits>,
    pub(crate) hit_families: HitFamilies,
}

impl RuleCounters {
    /// Counts a descriptor that matched the rule `rule_id` of `domain`.
    pub fn matched(&self, domain: &str, rule_id: &str, outcome: DecisionOutcome) {
        let slot = DecisionOutcome::RULE_OUTCOMES
            .iter()
            .position(|&o| o == outcome);
        let counter = self
            .by_rule
            .get(rule_id)
            .zip(slot)
            .and_then(|(counters, i)| counters.get(i));
        match counter {
            Some(counter) => {
                counter.inc();
            }
            // A limit override from the request: its id is `domain.<override>`, bounded.
            None => {
                self.family
                    .get_or_create(&DecisionLabels {
                        domain: domain.to_string(),
                        rule: rule_id.to_string(),
                        outcome,
                    })
                    .inc();
            }
        }
    }

    /// Counts `hits` of rule `rule_id` of `domain` that `decision` decided, in
    /// envoyproxy/ratelimit's hit counters (`shadow_denied`: denied, not enforced).
    pub fn hits(
        &self,
        domain: &str,
        rule_id: &str,
        decision: &weir_core::Decision,
        hits: u64,
        shadow_denied: bool,
        near: NearLimit,
    ) {
        match self.hits.get(rule_id) {
            Some(counters) => counters.count(decision, hits, shadow_denied, near),
            // A limit override from the request: its id is `domain.<override>`, bounded.
            None => self.hit_families.counters(domain, rule_id).count(
                decision,
                hits,
                shadow_denied,
                near,
            ),
        }
    }

    /// Counts a descriptor of a configured `domain` that matched no rule.
    pub fn unmatched(&self, domain: &str) {
        match self.no_rule.get(domain) {
            Some(counter) => counter.inc(),
            None => self.unknown_domain.inc(),
        };
    }

    /// Counts a descriptor of a domain no rule file defines.
    pub fn unknown_domain(&self) {
        self.unknown_domain.inc();
    }

    /// Whether `domain` is a configured domain (a bounded label).
    pub fn knows_domain(&self, domain: &str) -> bool {
        self.no_rule.contains_key(domain)
    }
}
