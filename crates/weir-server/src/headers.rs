//! Rate-limit response headers from a [`Verdict`], for the HTTP API and for Envoy to add to
//! its responses (gRPC `response_headers_to_add`).
//!
//! - IETF `draft-ietf-httpapi-ratelimit-headers` (drafts 09–11): `RateLimit-Policy` lists
//!   every limit that applied (`"rule";q=LIMIT;w=WINDOW_SECONDS`), and `RateLimit` gives the
//!   live state of the tightest one (`"rule";r=REMAINING;t=SECONDS`, where `t` is the
//!   retry-after when denied and the reset otherwise, rounded up).
//! - `X-RateLimit-Limit` / `-Remaining` / `-Reset`, as envoyproxy/ratelimit sends them
//!   (`X-RateLimit-Limit: 10, 10;w=60`), when asked for.
//!
//! Shadow denials are reported here too: shadow mode changes enforcement, not reporting.
//! The rendering itself is `weir_tower`'s, shared with the layer and the proxy.

use std::sync::Arc;

pub use weir_tower::{ceil_secs, HeaderStyle};
use weir_tower::{render_headers, Applied};

use crate::verdict::Verdict;

/// The headers for `verdict`, as `(name, value)` pairs; empty when no limit applied.
/// Rendered by `weir_tower` (one implementation for the server, the layer and the proxy);
/// the tightest limit is the verdict's (an enforced denial first).
pub fn rate_limit_headers(verdict: &Verdict, style: HeaderStyle) -> Vec<(&'static str, String)> {
    let Some((tight, decision)) = verdict.tightest() else {
        return Vec::new();
    };
    let applied: Vec<Applied> = verdict
        .statuses
        .iter()
        .filter_map(|s| {
            let (m, d) = (s.matched.as_ref()?, s.decision.as_ref()?);
            Some(Applied {
                name: Arc::clone(&m.id),
                window: m.window(),
                decision: *d,
            })
        })
        .collect();
    let tight = Applied {
        name: Arc::clone(&tight.id),
        window: tight.window(),
        decision: *decision,
    };
    render_headers(&applied, &tight, style)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use weir_config::Limit;
    use weir_core::{Decision, Rule};

    use super::*;
    use crate::verdict::{Code, MatchedRule, Status};

    fn status(id: &str, rule: Rule, remaining: u64, allowed: bool) -> Status {
        Status {
            code: if allowed { Code::Ok } else { Code::OverLimit },
            matched: Some(MatchedRule {
                id: Arc::from(id),
                name: None,
                limit: Limit::Rule(rule),
                rate_limit: None,
                shadow: false,
            }),
            decision: Some(Decision {
                allowed,
                limit: rule.limit(),
                remaining,
                reset_after: Duration::from_millis(59_500),
                retry_after: if allowed {
                    Duration::ZERO
                } else {
                    Duration::from_millis(1_200)
                },
                delay: Duration::ZERO,
            }),
            shadow_denied: false,
            never_allowed: false,
        }
    }

    #[test]
    fn ietf_and_x_headers_describe_the_tightest_limit() {
        let minute = Rule::fixed_window(100, Duration::from_secs(60)).unwrap();
        let second = Rule::fixed_window(10, Duration::from_secs(1)).unwrap();
        let verdict = Verdict {
            overall: Code::OverLimit,
            statuses: vec![
                status("api.user", minute, 40, true),
                Status::unmatched(),
                status("api.\"burst\"", second, 0, false),
            ],
        };
        let headers = rate_limit_headers(
            &verdict,
            HeaderStyle {
                ietf: true,
                x_ratelimit: true,
            },
        );
        assert_eq!(
            headers,
            [
                (
                    "ratelimit-policy",
                    r#""api.user";q=100;w=60, "api.\"burst\"";q=10;w=1"#.to_string()
                ),
                ("ratelimit", r#""api.\"burst\"";r=0;t=2"#.to_string()),
                ("x-ratelimit-limit", "10, 10;w=1".to_string()),
                ("x-ratelimit-remaining", "0".to_string()),
                ("x-ratelimit-reset", "2".to_string()),
            ]
        );
        let none = Verdict {
            overall: Code::Ok,
            statuses: vec![Status::unmatched()],
        };
        assert!(rate_limit_headers(&none, HeaderStyle::default()).is_empty());
    }
}
