//! Rate-limit response headers from the limits that applied to a request: the IETF
//! `draft-ietf-httpapi-ratelimit-headers` fields (drafts 09–11) and, when asked for,
//! `X-RateLimit-*`. The last step of a decision's path in the tower layer, `weir proxy` and
//! `weir serve`'s HTTP API: they go on every response a limit applied to, allowed or not,
//! so clients can pace themselves.
//!
//! - `RateLimit-Policy` lists every limit (`"name";q=LIMIT;w=WINDOW_SECONDS`);
//! - `RateLimit` gives the live state of the tightest (`"name";r=REMAINING;t=SECONDS`,
//!   `t` being the retry-after when denied and the reset otherwise, rounded up);
//! - `X-RateLimit-Limit` / `-Remaining` / `-Reset`, as envoyproxy/ratelimit sends them.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use weir_core::Decision;

/// One limit that applied to a request, and its decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The limit's name (a policy name or a rule id): the `RateLimit` headers' policy name.
    pub name: Arc<str>,
    /// The rule's window (zero when it has none, e.g. a concurrency rule).
    pub window: Duration,
    /// The decision.
    pub decision: Decision,
}

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

/// A policy name as a structured-field string: printable ASCII, `"` and `\` escaped,
/// appended to `out` (no string of its own: this runs on every response).
fn push_sf_string(out: &mut String, name: &str) {
    out.push('"');
    // The common name (printable ASCII, no quote or backslash) is copied whole. The test
    // folds without an early exit, so that it runs over many bytes at once.
    let plain = name.bytes().fold(true, |plain, b| {
        plain & (b' '..=b'~').contains(&b) & (b != b'"') & (b != b'\\')
    });
    if plain {
        out.push_str(name);
        out.push('"');
        return;
    }
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
}

/// Appends `n` in decimal (no formatting machinery: this runs on every response).
fn push_u64(out: &mut String, n: u64) {
    out.push_str(itoa::Buffer::new().format(n));
}

/// The tightest limit: a denial before an allowance, then the fewest remaining.
pub fn tightest(applied: &[Applied]) -> Option<&Applied> {
    applied
        .iter()
        .min_by_key(|a| (a.decision.allowed, a.decision.remaining))
}

/// The headers for the limits that applied, as `(name, value)` pairs; empty when none did.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use weir_core::{Limiter, Rule, Key};
/// use weir_names::{rate_limit_headers, Applied, HeaderStyle};
///
/// # tokio::runtime::Builder::new_current_thread().enable_time().build()?.block_on(async {
/// let rule = Rule::fixed_window(10, Duration::from_secs(60))?;
/// let decision = Limiter::default().check(&Key::new("k")?, &rule, 1).await?;
/// let applied = [Applied { name: Arc::from("per_ip"), window: rule.window(), decision }];
/// let headers = rate_limit_headers(&applied, HeaderStyle::default());
/// assert_eq!(headers[0], ("ratelimit-policy", r#""per_ip";q=10;w=60"#.to_string()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn rate_limit_headers(applied: &[Applied], style: HeaderStyle) -> Vec<(&'static str, String)> {
    match tightest(applied) {
        Some(tight) => render_headers(applied, tight, style),
        None => Vec::new(),
    }
}

/// The headers for `applied`, with `tight` as the limit `RateLimit` and `X-RateLimit-*`
/// describe (for callers with their own notion of the tightest, e.g. the decision server,
/// which prefers an enforced denial over a shadow one). The text of
/// [`put_header_values`], as strings.
pub fn render_headers(
    applied: &[Applied],
    tight: &Applied,
    style: HeaderStyle,
) -> Vec<(&'static str, String)> {
    let mut headers =
        Vec::with_capacity(usize::from(style.ietf) * 2 + usize::from(style.x_ratelimit) * 3);
    put_header_values(applied, tight, style, |name, value| {
        headers.push((name, String::from_utf8_lossy(&value).into_owned()));
    });
    headers
}

/// Gives `put` each rate-limit header of `applied` (with `tight` the tightest, as for
/// [`render_headers`]), in order, as the bytes of a header value: what the proxy, the
/// layer and `/v1/check` put on every response. The `RateLimit-Policy` value changes only
/// with the rules, so it is kept per thread and shared ([`policy_value`]); the others are
/// written once, into the value's own buffer.
pub fn put_header_values(
    applied: &[Applied],
    tight: &Applied,
    style: HeaderStyle,
    mut put: impl FnMut(&'static str, Bytes),
) {
    let d: &Decision = &tight.decision;
    let reset = ceil_secs(if d.allowed {
        d.reset_after
    } else {
        d.retry_after
    });
    if style.ietf {
        put("ratelimit-policy", policy_value(applied));
        put(
            "ratelimit",
            written(|live| {
                push_sf_string(live, &tight.name);
                live.push_str(";r=");
                push_u64(live, d.remaining);
                live.push_str(";t=");
                push_u64(live, reset);
            }),
        );
    }
    if style.x_ratelimit {
        let mut limit = String::with_capacity(48);
        push_u64(&mut limit, d.limit);
        if !tight.window.is_zero() {
            limit.push_str(", ");
            push_u64(&mut limit, d.limit);
            limit.push_str(";w=");
            push_u64(&mut limit, ceil_secs(tight.window));
        }
        put("x-ratelimit-limit", owned_bytes(limit));
        put("x-ratelimit-remaining", u64_bytes(d.remaining));
        put("x-ratelimit-reset", u64_bytes(reset));
    }
}

/// The `RateLimit-Policy` value of `applied`: every limit's `"name";q=LIMIT;w=SECONDS`.
fn policy_text(applied: &[Applied]) -> String {
    let mut policy = String::with_capacity(applied.iter().map(|a| a.name.len() + 32).sum());
    for a in applied {
        if !policy.is_empty() {
            policy.push_str(", ");
        }
        push_sf_string(&mut policy, &a.name);
        policy.push_str(";q=");
        push_u64(&mut policy, a.decision.limit);
        if !a.window.is_zero() {
            policy.push_str(";w=");
            push_u64(&mut policy, ceil_secs(a.window));
        }
    }
    policy
}

/// How many `RateLimit-Policy` values each thread keeps (the requests of a few rule
/// combinations take turns without rendering again).
const KEPT_POLICIES: usize = 4;

/// A kept `RateLimit-Policy` value and what it was rendered from: each limit's name (held,
/// so the pointer compared is never another name's), limit and window.
struct KeptPolicy {
    of: Vec<(Arc<str>, u64, Duration)>,
    value: Bytes,
}

impl KeptPolicy {
    fn renders(&self, applied: &[Applied]) -> bool {
        self.of.len() == applied.len()
            && self
                .of
                .iter()
                .zip(applied)
                .all(|((name, limit, window), a)| {
                    Arc::ptr_eq(name, &a.name) && *limit == a.decision.limit && *window == a.window
                })
    }
}

/// The `RateLimit-Policy` value of `applied` as a header value's bytes, kept per thread:
/// a request of the same rules as one of the last few shares their value (a reference
/// count) instead of rendering it again. The same text either way: the kept value is
/// compared on everything it was rendered from.
pub fn policy_value(applied: &[Applied]) -> Bytes {
    thread_local! {
        static KEPT: RefCell<(Vec<KeptPolicy>, usize)> = const { RefCell::new((Vec::new(), 0)) };
    }
    KEPT.with(|kept| {
        let Ok(mut kept) = kept.try_borrow_mut() else {
            return owned_bytes(policy_text(applied));
        };
        let (policies, next) = &mut *kept;
        if let Some(found) = policies.iter().find(|p| p.renders(applied)) {
            return found.value.clone();
        }
        let value = owned_bytes(policy_text(applied));
        let policy = KeptPolicy {
            of: applied
                .iter()
                .map(|a| (Arc::clone(&a.name), a.decision.limit, a.window))
                .collect(),
            value: value.clone(),
        };
        if policies.len() < KEPT_POLICIES {
            policies.push(policy);
        } else if let Some(slot) = policies.get_mut(*next) {
            *slot = policy;
            *next = (*next + 1) % KEPT_POLICIES;
        }
        value
    })
}

/// A rendered value as bytes, without copying it (its buffer trimmed to its length).
/// A value written by `write` into this thread's buffer and copied out at its exact size:
/// one allocation (a `String` of a guessed size made `Bytes` takes a second, to shrink it).
fn written(write: impl FnOnce(&mut String)) -> Bytes {
    /// A buffer grown past this by an unusually long value is not kept.
    const KEPT_BYTES: usize = 1024;
    thread_local! {
        static BUFFER: RefCell<String> = const { RefCell::new(String::new()) };
    }
    BUFFER.with(|buffer| {
        let Ok(mut buffer) = buffer.try_borrow_mut() else {
            let mut own = String::new();
            write(&mut own);
            return owned_bytes(own);
        };
        buffer.clear();
        write(&mut buffer);
        let value = Bytes::copy_from_slice(buffer.as_bytes());
        if buffer.capacity() > KEPT_BYTES {
            *buffer = String::new();
        }
        value
    })
}

fn owned_bytes(text: String) -> Bytes {
    Bytes::from(text.into_bytes().into_boxed_slice())
}

/// `n` in decimal, as bytes.
fn u64_bytes(n: u64) -> Bytes {
    Bytes::copy_from_slice(itoa::Buffer::new().format(n).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn applied(name: &str, window_s: u64, limit: u64, remaining: u64, allowed: bool) -> Applied {
        Applied {
            name: Arc::from(name),
            window: Duration::from_secs(window_s),
            decision: Decision {
                allowed,
                limit,
                remaining,
                reset_after: Duration::from_millis(59_500),
                retry_after: if allowed {
                    Duration::ZERO
                } else {
                    Duration::from_millis(1_200)
                },
                delay: Duration::ZERO,
            },
        }
    }

    #[test]
    fn ietf_and_x_headers_describe_the_tightest_limit() {
        let list = [
            applied("api.user", 60, 100, 40, true),
            applied("api.\"burst\"", 1, 10, 0, false),
        ];
        let headers = rate_limit_headers(
            &list,
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
        assert!(rate_limit_headers(&[], HeaderStyle::default()).is_empty());
    }

    /// The kept `RateLimit-Policy` values are always the text rendered now: requests of
    /// more rule combinations than are kept take turns, and a limit that changes under the
    /// same name (a reload) renders its new value.
    #[test]
    fn kept_policy_values_always_equal_the_rendered_text() {
        let sets: Vec<Vec<Applied>> = (0..KEPT_POLICIES + 2)
            .map(|i| {
                (0..=i % 3)
                    .map(|j| applied(&format!("rule{i}.{j}"), 60, 10 + j as u64, 1, true))
                    .collect()
            })
            .collect();
        for round in 0..3 {
            for set in sets.iter().chain(sets.iter().rev()) {
                let kept = policy_value(set);
                assert_eq!(&kept[..], policy_text(set).as_bytes(), "round {round}");
            }
        }
        let mut changed = sets[0].clone();
        policy_value(&changed);
        changed[0].decision.limit = 99;
        assert_eq!(
            &policy_value(&changed)[..],
            policy_text(&changed).as_bytes()
        );
        assert!(policy_text(&changed).contains("q=99"));
        changed[0].window = Duration::from_secs(1);
        assert!(std::str::from_utf8(&policy_value(&changed))
            .unwrap()
            .ends_with("q=99;w=1"));
    }
}
