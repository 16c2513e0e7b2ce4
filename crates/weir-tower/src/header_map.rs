//! One call from a limiter's answer to response headers: a [`Decision`] (from `check`), a
//! [`Usage`] (from `inspect`, e.g. a key locked out) or the layer's [`Evaluation`] becomes
//! an [`http::HeaderMap`] with the rate-limit headers and, when denied, `Retry-After`
//! (whole seconds, always rounded up). For handlers that answer a `429` themselves (a login
//! lockout) with the same headers the layer sends; the rendering is [`weir_names`]'.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderName, HeaderValue, RETRY_AFTER};
use http::HeaderMap;
use weir_core::{Decision, Rule, Usage};

use crate::limits::Evaluation;
use weir_names::Applied;
use weir_names::{ceil_secs, put_header_values, tightest, HeaderStyle};

/// An answer of the limiter that response headers describe: a [`Decision`], or a
/// [`Usage`] from `inspect`.
pub trait AsDecision {
    /// The answer as a decision. A [`Usage`] reads as denied while the key is blocked (a
    /// lockout), with `retry_after` the time left; otherwise as allowed, with what remains.
    fn as_decision(&self) -> Decision;
}

impl AsDecision for Decision {
    fn as_decision(&self) -> Decision {
        *self
    }
}

impl AsDecision for Usage {
    fn as_decision(&self) -> Decision {
        let blocked = !self.blocked_for.is_zero();
        Decision {
            allowed: !blocked,
            limit: self.limit,
            remaining: if blocked { 0 } else { self.remaining },
            reset_after: self.reset_after.max(self.blocked_for),
            retry_after: self.blocked_for,
            delay: Duration::ZERO,
        }
    }
}

/// The response headers for one limit's answer, in the default style (the IETF fields):
/// `RateLimit-Policy`, `RateLimit` and, when denied, `Retry-After` rounded up to whole
/// seconds (never down: 29.99 s is `30`). `name` names the limit in the headers; `rule`
/// gives its window.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Key, Limiter, Rule};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// let limiter = Limiter::default();
/// let rule = Rule::fixed_window(1, Duration::from_secs(60))?;
/// let key = Key::new("login:ann")?;
/// limiter.check(&key, &rule, 1).await?;
/// let denied = limiter.check(&key, &rule, 1).await?;
/// let headers = weir_tower::headers_for("login", &rule, &denied);
/// assert_eq!(headers["ratelimit-policy"], r#""login";q=1;w=60"#);
/// assert!(headers.contains_key("retry-after"));
/// // In axum: (StatusCode::TOO_MANY_REQUESTS, headers, "slow down").into_response()
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn headers_for(name: &str, rule: &Rule, answer: &impl AsDecision) -> HeaderMap {
    headers_in_style(HeaderStyle::default(), name, rule, answer)
}

/// [`headers_for`] in another `style` (e.g. with `X-RateLimit-*`).
pub fn headers_in_style(
    style: HeaderStyle,
    name: &str,
    rule: &Rule,
    answer: &impl AsDecision,
) -> HeaderMap {
    let decision = answer.as_decision();
    let applied = [Applied {
        name: Arc::from(name),
        window: rule.window(),
        decision,
    }];
    headers_of(&applied, style, !decision.allowed)
}

impl Evaluation {
    /// The response headers for this evaluation: the rate-limit headers of every limit
    /// that applied (none when none did) and, when the request is denied, `Retry-After`
    /// rounded up (a denial that is not enforced, e.g. a shadow rule's, adds none).
    pub fn headers(&self, style: HeaderStyle) -> HeaderMap {
        headers_of(&self.applied, style, !self.allowed)
    }

    /// [`Evaluation::headers`] inserted straight into `headers` (a response's own),
    /// replacing values of the same name: no map of their own to build, hash and move
    /// (on every proxied response).
    pub(crate) fn insert_headers(&self, style: HeaderStyle, headers: &mut HeaderMap) {
        put_headers(&self.applied, style, !self.allowed, |name, value| {
            headers.insert(name, value);
        });
    }
}

/// The rate-limit headers of `applied`, and when `denied` the longest denial's
/// `Retry-After`.
fn headers_of(applied: &[Applied], style: HeaderStyle, denied: bool) -> HeaderMap {
    let mut headers = HeaderMap::new();
    put_headers(applied, style, denied, |name, value| {
        headers.insert(name, value);
    });
    headers
}

/// Gives `put` each header of [`headers_of`], in order.
fn put_headers(
    applied: &[Applied],
    style: HeaderStyle,
    denied: bool,
    mut put: impl FnMut(HeaderName, HeaderValue),
) {
    if let Some(tight) = tightest(applied) {
        put_header_values(applied, tight, style, |name, value| {
            if let (Some(name), Ok(value)) =
                (header_name(name), HeaderValue::from_maybe_shared(value))
            {
                put(name, value);
            }
        });
    }
    if !denied {
        return;
    }
    let retry_after = applied
        .iter()
        .filter(|a| !a.decision.allowed)
        .map(|a| a.decision.retry_after)
        .max();
    if let Some(retry_after) = retry_after {
        put(
            RETRY_AFTER,
            HeaderValue::from(ceil_secs(retry_after).max(1)),
        );
    }
}

/// The name of a rate-limit header, without parsing it again on every response.
pub(crate) fn header_name(name: &'static str) -> Option<HeaderName> {
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const LIVE: HeaderName = HeaderName::from_static("ratelimit");
    const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    Some(match name {
        "ratelimit-policy" => POLICY,
        "ratelimit" => LIVE,
        "x-ratelimit-limit" => X_LIMIT,
        "x-ratelimit-remaining" => X_REMAINING,
        "x-ratelimit-reset" => X_RESET,
        other => return HeaderName::try_from(other).ok(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(retry_after: Duration) -> Decision {
        Decision {
            allowed: false,
            limit: 5,
            remaining: 0,
            reset_after: retry_after,
            retry_after,
            delay: Duration::ZERO,
        }
    }

    #[test]
    fn retry_after_is_rounded_up_never_down() {
        let rule = Rule::fixed_window(5, Duration::from_secs(60)).unwrap();
        for (retry_ms, secs) in [(29_990, "30"), (29_001, "30"), (30_000, "30"), (200, "1")] {
            let headers = headers_for("login", &rule, &denied(Duration::from_millis(retry_ms)));
            assert_eq!(headers[RETRY_AFTER], secs, "{retry_ms} ms");
            assert_eq!(
                headers["ratelimit"],
                format!(r#""login";r=0;t={secs}"#),
                "{retry_ms} ms"
            );
        }
        // 29.999999999 s: one nanosecond short of 30 is still 30.
        let nearly = Duration::from_secs(30) - Duration::from_nanos(1);
        assert_eq!(headers_for("l", &rule, &denied(nearly))[RETRY_AFTER], "30");
    }

    #[test]
    fn a_locked_key_reads_as_denied_until_the_lockout_ends() {
        let rule = Rule::sliding_log(3, Duration::from_secs(60)).unwrap();
        let locked = Usage {
            used: 3,
            limit: 3,
            remaining: 0,
            blocked_for: Duration::from_millis(29_990),
            strikes: 1,
            reset_after: Duration::from_secs(10),
        };
        let headers = headers_for("logins", &rule, &locked);
        assert_eq!(headers[RETRY_AFTER], "30");
        assert_eq!(headers["ratelimit"], r#""logins";r=0;t=30"#);
        assert_eq!(headers["ratelimit-policy"], r#""logins";q=3;w=60"#);

        let free = Usage {
            blocked_for: Duration::ZERO,
            used: 1,
            remaining: 2,
            strikes: 0,
            ..locked
        };
        let headers = headers_for("logins", &rule, &free);
        assert!(
            !headers.contains_key(RETRY_AFTER),
            "not denied: no Retry-After"
        );
        assert_eq!(headers["ratelimit"], r#""logins";r=2;t=10"#);

        let x_style = HeaderStyle {
            ietf: false,
            x_ratelimit: true,
        };
        let x = headers_in_style(x_style, "logins", &rule, &locked);
        assert_eq!(x["x-ratelimit-reset"], "30");
        assert!(!x.contains_key("ratelimit"));
    }

    /// A denial that is not enforced (a shadow rule's, in `weir proxy`) lets the request
    /// through: its response carries the rate-limit headers but no `Retry-After`.
    #[test]
    fn an_allowed_evaluation_has_no_retry_after_even_with_a_shadow_denial() {
        let applied = vec![Applied {
            name: Arc::from("shadow"),
            window: Duration::from_secs(60),
            decision: denied(Duration::from_secs(5)),
        }];
        let mut evaluation = Evaluation {
            applied,
            ..Evaluation::unlimited()
        };
        let headers = evaluation.headers(HeaderStyle::default());
        assert!(!headers.contains_key(RETRY_AFTER));
        assert_eq!(headers["ratelimit"], r#""shadow";r=0;t=5"#);
        evaluation.allowed = false;
        assert_eq!(evaluation.headers(HeaderStyle::default())[RETRY_AFTER], "5");
    }
}
