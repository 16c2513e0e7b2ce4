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

use std::fmt::Write as _;
use std::time::Duration;

use crate::verdict::Verdict;

/// Which headers to produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderStyle {
    /// IETF `RateLimit-Policy` and `RateLimit` (default on).
    pub ietf: bool,
    /// `X-RateLimit-Limit`, `X-RateLimit-Remaining`, `X-RateLimit-Reset` (default off).
    pub x_ratelimit: bool,
}

impl Default for HeaderStyle {
    fn default() -> Self {
        Self {
            ietf: true,
            x_ratelimit: false,
        }
    }
}

/// Whole seconds, rounded up (a client waiting `t` seconds must not be early).
pub fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// A policy name as a structured-field string: printable ASCII, `"` and `\` escaped.
fn sf_string(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('"');
    for c in name.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('_'),
        }
    }
    out.push('"');
    out
}

/// The headers for `verdict`, as `(name, value)` pairs; empty when no limit applied.
pub fn rate_limit_headers(verdict: &Verdict, style: HeaderStyle) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    let Some((tightest, decision)) = verdict.tightest() else {
        return headers;
    };
    let reset = if decision.allowed {
        decision.reset_after
    } else {
        decision.retry_after
    };
    if style.ietf {
        let mut policy = String::new();
        for status in &verdict.statuses {
            let (Some(m), Some(d)) = (&status.matched, &status.decision) else {
                continue;
            };
            if !policy.is_empty() {
                policy.push_str(", ");
            }
            let _ = write!(policy, "{};q={}", sf_string(&m.id), d.limit);
            if let Some(window) = Some(m.window()).filter(|w| !w.is_zero()) {
                let _ = write!(policy, ";w={}", ceil_secs(window));
            }
        }
        headers.push(("ratelimit-policy", policy));
        headers.push((
            "ratelimit",
            format!(
                "{};r={};t={}",
                sf_string(&tightest.id),
                decision.remaining,
                ceil_secs(reset)
            ),
        ));
    }
    if style.x_ratelimit {
        let mut limit = decision.limit.to_string();
        if let Some(window) = Some(tightest.window()).filter(|w| !w.is_zero()) {
            let _ = write!(limit, ", {};w={}", decision.limit, ceil_secs(window));
        }
        headers.push(("x-ratelimit-limit", limit));
        headers.push(("x-ratelimit-remaining", decision.remaining.to_string()));
        headers.push(("x-ratelimit-reset", ceil_secs(reset).to_string()));
    }
    headers
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

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
