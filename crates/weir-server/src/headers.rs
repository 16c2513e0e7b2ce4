//! Rate-limit response headers from a [`Verdict`], for the HTTP API and for Envoy to add to
//! its responses (gRPC `response_headers_to_add`).
//!
//! - IETF `draft-ietf-httpapi-ratelimit-headers` (drafts 09–11): `RateLimit-Policy` lists
//!   every limit that applied (`"rule";q=LIMIT;w=WINDOW_SECONDS`), and `RateLimit` gives the
//!   live state of the tightest one (`"rule";r=REMAINING;t=SECONDS`, where `t` is the
//!   retry-after when denied and the reset otherwise, rounded up).
//! - `X-RateLimit-Limit` / `-Remaining` / `-Reset` (`X-RateLimit-Limit: 10, 10;w=60`,
//!   the IETF draft's first form), when asked for.
//! - envoyproxy/ratelimit's own three headers ([`LegacyHeaders`], names configurable as its
//!   `LIMIT_LIMIT_HEADER` / `LIMIT_REMAINING_HEADER` / `LIMIT_RESET_HEADER`, by default
//!   `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset`): the tightest limit's
//!   requests per window, what is left, and the seconds until its window resets, plain
//!   numbers. Only for Envoy ([`ResponseHeaders`]), which gets **no** header unless asked,
//!   as ratelimit's `LIMIT_RESPONSE_HEADERS_ENABLED` is off by default (they name a rule to
//!   the end client).
//!
//! Shadow denials are reported here too: shadow mode changes enforcement, not reporting.
//! A denial made because the store is down and the rule fails closed adds
//! [`REASON_HEADER`]`: `[`STORE_UNAVAILABLE`] (HTTP header or gRPC metadata), so that it
//! cannot be taken for a limit.
//! The IETF and `X-` rendering is `weir_names`', shared with the layer and the proxy.

use std::sync::Arc;

use axum::body::Bytes;
pub use weir_names::{ceil_secs, HeaderStyle};
use weir_names::{put_header_values, Applied};

use weir_engine::Verdict;

/// The header (or gRPC metadata key) saying why a request was denied when no limit was
/// reached: [`STORE_UNAVAILABLE`], a fail-closed rule during a store outage.
pub(crate) const REASON_HEADER: &str = "x-weir-reason";

/// [`REASON_HEADER`]'s value for a fail-closed denial during a store outage.
pub(crate) const STORE_UNAVAILABLE: &str = "store-unavailable";

/// envoyproxy/ratelimit's response header names (its `LIMIT_*_HEADER` settings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyHeaders {
    limit: String,
    remaining: String,
    reset: String,
}

/// A header name that is not an HTTP token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)")]
pub struct HeaderNameError(pub String);

impl Default for LegacyHeaders {
    /// `RateLimit-Limit`, `RateLimit-Remaining`, `RateLimit-Reset` (ratelimit's defaults).
    fn default() -> Self {
        Self {
            limit: "RateLimit-Limit".into(),
            remaining: "RateLimit-Remaining".into(),
            reset: "RateLimit-Reset".into(),
        }
    }
}

impl LegacyHeaders {
    /// The three names, each checked to be an HTTP header name.
    ///
    /// ```
    /// use weir_server::LegacyHeaders;
    /// assert!(LegacyHeaders::new("X-Limit", "X-Left", "X-Reset").is_ok());
    /// assert!(LegacyHeaders::new("X Limit", "X-Left", "X-Reset").is_err());
    /// ```
    pub fn new(limit: &str, remaining: &str, reset: &str) -> Result<Self, HeaderNameError> {
        let check = |name: &str| {
            let token = !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if token {
                Ok(name.to_string())
            } else {
                Err(HeaderNameError(name.to_string()))
            }
        };
        Ok(Self {
            limit: check(limit)?,
            remaining: check(remaining)?,
            reset: check(reset)?,
        })
    }

    /// The limit header's name.
    pub fn limit(&self) -> &str {
        &self.limit
    }

    /// The remaining header's name.
    pub fn remaining(&self) -> &str {
        &self.remaining
    }

    /// The reset header's name.
    pub fn reset(&self) -> &str {
        &self.reset
    }
}

/// The headers Envoy is asked to add to its responses (gRPC `response_headers_to_add`,
/// `/json`'s `responseHeadersToAdd`). The default adds none, as envoyproxy/ratelimit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHeaders {
    /// IETF and `X-RateLimit-*` headers (default: neither).
    pub style: HeaderStyle,
    /// ratelimit's own three headers (default: off).
    pub legacy: Option<LegacyHeaders>,
}

impl Default for ResponseHeaders {
    fn default() -> Self {
        Self::NONE
    }
}

impl ResponseHeaders {
    /// No header at all.
    pub const NONE: ResponseHeaders = ResponseHeaders {
        style: HeaderStyle {
            ietf: false,
            x_ratelimit: false,
        },
        legacy: None,
    };

    /// The headers for `verdict`, as `(name, value)` pairs; empty when no limit applied.
    pub fn render(&self, verdict: &Verdict) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = verdict_headers(verdict, self.style)
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
        if let (Some(names), Some((_, decision))) = (&self.legacy, verdict.tightest()) {
            out.push((names.limit.clone(), decision.limit.to_string()));
            out.push((names.remaining.clone(), decision.remaining.to_string()));
            out.push((
                names.reset.clone(),
                ceil_secs(decision.reset_after).to_string(),
            ));
        }
        out
    }
}

/// The headers for `verdict`, as `(name, value)` pairs; empty when no limit applied.
/// Rendered by `weir_names` (one implementation for the server, the layer and the proxy);
/// the tightest limit is the verdict's (an enforced denial first).
///
/// A verdict with one limit (the common request: one descriptor) renders it as both the
/// policy and the tightest, without a list of one: no vector, one name shared.
pub fn verdict_headers(verdict: &Verdict, style: HeaderStyle) -> Vec<(&'static str, String)> {
    let mut headers = Vec::new();
    put_verdict_headers(verdict, style, |name, value| {
        headers.push((name, String::from_utf8_lossy(&value).into_owned()));
    });
    headers
}

/// [`verdict_headers`] given to `put` one by one, as a header value's bytes
/// ([`weir_names::put_header_values`]: the `RateLimit-Policy` value kept per thread), for
/// `/v1/check`'s every answer.
pub(crate) fn put_verdict_headers(
    verdict: &Verdict,
    style: HeaderStyle,
    put: impl FnMut(&'static str, Bytes),
) {
    let Some((tight, decision)) = verdict.tightest() else {
        return;
    };
    let limited = |s: &weir_engine::Status| s.matched.is_some() && s.decision.is_some();
    let tight = Applied {
        name: Arc::clone(&tight.id),
        window: tight.window(),
        decision: *decision,
    };
    if verdict.statuses.iter().filter(|s| limited(s)).count() == 1 {
        // The one limit is the tightest.
        return put_header_values(std::slice::from_ref(&tight), &tight, style, put);
    }
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
    put_header_values(&applied, &tight, style, put);
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use weir_config::Limit;
    use weir_core::{Decision, Rule};

    use super::*;
    use weir_engine::{Code, MatchedRule, Status};

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
            failed_closed: false,
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
        let headers = verdict_headers(
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
        assert!(verdict_headers(&none, HeaderStyle::default()).is_empty());
    }

    #[test]
    fn envoy_gets_no_header_by_default_and_ratelimits_three_when_asked() {
        let minute = Rule::fixed_window(100, Duration::from_secs(60)).unwrap();
        let verdict = Verdict {
            overall: Code::Ok,
            statuses: vec![status("api.user", minute, 40, true)],
        };
        assert!(ResponseHeaders::default().render(&verdict).is_empty());
        let legacy = ResponseHeaders {
            legacy: Some(LegacyHeaders::default()),
            ..ResponseHeaders::NONE
        };
        let pairs = |v: Vec<(String, String)>| {
            v.into_iter()
                .map(|(n, v)| format!("{n}: {v}"))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            pairs(legacy.render(&verdict)),
            [
                "RateLimit-Limit: 100",
                "RateLimit-Remaining: 40",
                "RateLimit-Reset: 60"
            ]
        );
        let renamed = ResponseHeaders {
            legacy: Some(LegacyHeaders::new("X-Limit", "X-Left", "X-Reset").unwrap()),
            ..ResponseHeaders::NONE
        };
        assert_eq!(
            pairs(renamed.render(&verdict)),
            ["X-Limit: 100", "X-Left: 40", "X-Reset: 60"]
        );
        let none = Verdict {
            overall: Code::Ok,
            statuses: vec![Status::unmatched()],
        };
        assert!(legacy.render(&none).is_empty());
        assert_eq!(
            LegacyHeaders::new("ok", "", "x").unwrap_err().to_string(),
            "\"\" is not a valid HTTP header name (letters, digits and !#$%&'*+-.^_`|~ only)"
        );
    }
}
