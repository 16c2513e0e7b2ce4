//! The answer to one rate-limit request, before it is shaped for an API: an overall code
//! and one [`Status`] per descriptor. HTTP (`/v1/check`, `/json`) and gRPC render the same
//! `Verdict`, so the three APIs cannot disagree.

use std::sync::Arc;

use std::time::Duration;

use weir_config::{Limit, RateLimitSpec};
use weir_core::Decision;

/// OK or over the limit: Envoy's codes, used by every API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// Allowed.
    Ok,
    /// Over the limit: deny the request.
    OverLimit,
}

impl Code {
    /// `OK` or `OVER_LIMIT`, as Envoy and the JSON APIs spell them.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::OverLimit => "OVER_LIMIT",
        }
    }
}

/// The rule a descriptor matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchedRule {
    /// The rule's id (bounded; the `rule` metrics label).
    pub id: Arc<str>,
    /// The rule's `name`, if any.
    pub name: Option<Arc<str>>,
    /// What the rule does: check a Weir rule, allow (unlimited) or deny everything.
    pub limit: Limit,
    /// The `rate_limit` block as written, for a ratelimit-format rule or a limit override
    /// (answered to Envoy exactly as written).
    pub rate_limit: Option<RateLimitSpec>,
    /// Shadow mode on this rule.
    pub shadow: bool,
}

impl MatchedRule {
    /// The window the limit applies over (`RateLimit-Policy`'s `w`); zero when none.
    pub fn window(&self) -> Duration {
        match self.limit {
            Limit::Rule(rule) => rule.window(),
            Limit::Deny { window } => window,
            _ => Duration::ZERO,
        }
    }
}

/// One descriptor's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The code reported for this descriptor: `OverLimit` only for an enforced denial, or
    /// for any denial under the global shadow mode (as envoyproxy/ratelimit reports it).
    pub code: Code,
    /// The rule matched, if any.
    pub matched: Option<MatchedRule>,
    /// The limiter's decision; `None` when no rule matched or the rule is unlimited.
    pub decision: Option<Decision>,
    /// Whether the limiter denied it but the denial was not enforced (shadow mode, global
    /// shadow mode, or outside the enforcement percentage).
    pub shadow_denied: bool,
    /// Whether the hits asked for are above the rule's capacity: denied, and no wait makes
    /// them pass (the HTTP API sends no `Retry-After` for it; Envoy's protocol cannot say
    /// it, so `OverLimit` with the decision's retry-after, never 0).
    pub never_allowed: bool,
    /// Whether the denial was made without the store: it is unavailable and the rule fails
    /// closed (`on_failure: fail_closed`). No limit was reached; the APIs say so (the
    /// JSON body's `"reason": "store_unavailable"`, an `x-weir-reason: store-unavailable`
    /// header or gRPC metadata) and the metrics count it as `failed_closed`.
    pub failed_closed: bool,
}

impl Status {
    /// A descriptor no rule matched.
    pub fn unmatched() -> Self {
        Self {
            code: Code::Ok,
            matched: None,
            decision: None,
            shadow_denied: false,
            never_allowed: false,
            failed_closed: false,
        }
    }

    /// Whether the rule is unlimited.
    pub fn is_unlimited(&self) -> bool {
        self.matched
            .as_ref()
            .is_some_and(|m| matches!(m.limit, Limit::Unlimited))
    }
}

/// The answer to one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `OverLimit` iff a descriptor without `quota_mode` is `OverLimit`, or every
    /// `quota_mode` descriptor is (never under the global shadow mode): a quota-mode
    /// descriptor may be `OverLimit` in an `Ok` verdict.
    pub overall: Code,
    /// One status per descriptor, in request order.
    pub statuses: Vec<Status>,
}

impl Verdict {
    /// The status headers should describe: the first enforced denial, else the limited
    /// descriptor with the least remaining (ties: the earliest).
    pub fn tightest(&self) -> Option<(&MatchedRule, &Decision)> {
        let limited = self
            .statuses
            .iter()
            .filter_map(|s| Some((s.matched.as_ref()?, s.decision.as_ref()?, s.code)));
        let mut best: Option<(&MatchedRule, &Decision, Code)> = None;
        for candidate in limited {
            let better = match best {
                None => true,
                Some((_, d, code)) => {
                    let key = |c: Code, d: &Decision| (c != Code::OverLimit, d.remaining);
                    key(candidate.2, candidate.1) < key(code, d)
                }
            };
            if better {
                best = Some(candidate);
            }
        }
        best.map(|(m, d, _)| (m, d))
    }

    /// Whether an enforced denial of this verdict was made because the store is
    /// unavailable and its rule fails closed (see [`Status::failed_closed`]).
    pub fn failed_closed(&self) -> bool {
        self.statuses
            .iter()
            .any(|s| s.failed_closed && s.code == Code::OverLimit)
    }
}
