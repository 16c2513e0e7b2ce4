//! `WEIR.CHECK domain key value [key value …] [HITS n]`: one descriptor checked against
//! the rule files, with the verdict `POST /v1/check` gives for the same descriptor, and the
//! same field names. The reply is a map (RESP3) or a flat array of names and values
//! (RESP2): `overall_code` and `code` (`OK` / `OVER_LIMIT`), `rule` (the matched rule's id,
//! nil when none matched), then as in `/v1/check`'s JSON `name`, `unlimited`, `limit`,
//! `remaining`, `reset_after_ms`, `retry_after_ms`, `delay_ms`, `shadow_denied`,
//! `never_allowed`, each present only when the JSON has it.
//!
//! The decision follows `weir-server`'s `Engine::decide` step for step: weir-config's
//! `matches` (most specific rule, `replaces`, the namespaced key); an unknown domain or an
//! unmatched descriptor is `OK`; `unlimited` never touches the store and
//! `requests_per_unit: 0` denies until the end of its window; hits above the rule's
//! capacity are `OVER_LIMIT` with `never_allowed` (no `retry_after_ms`); a shadow rule's
//! denial, or one outside `enforce_percent`'s share of keys, is reported `OK` with
//! `shadow_denied`; the server's shadow mode keeps `code` and makes `overall_code` `OK`; a
//! full memory store follows the rule's failure policy. What `weir serve` adds and this
//! does not: its metrics, its top-denied keys and `/readyz`'s degraded state.
//!
//! A trailing `HITS n` (any case) is always the option: a descriptor entry whose key is
//! `HITS` must not be the last one.

use std::time::Duration;

use bytes::Bytes;
use weir_config::{Descriptor, Limit, MatchError, Matched};
use weir_core::{CheckError, Clock, Decision, FailurePolicy, Key, Limiter, Store, StoreError};

use super::args::lossy;
use crate::protocol::Reply;
use crate::rules::Rules;

/// One descriptor's status, as `weir-server`'s `Status`.
#[derive(Debug, Default)]
struct Status {
    over: bool,
    matched: Option<Matched>,
    decision: Option<Decision>,
    shadow_denied: bool,
    never_allowed: bool,
}

/// `WEIR.CHECK`.
pub(crate) async fn check<L, S, C, R>(limiter: &L, rules: &R, shadow: bool, args: &[Bytes]) -> Reply
where
    L: std::ops::Deref<Target = Limiter<S, C>>,
    S: Store,
    C: Clock,
    R: Rules,
{
    let (domain, descriptor, hits) = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => return Reply::error(format!("ERR {message}")),
    };
    if domain.is_empty() {
        return Reply::error("ERR rate limit domain must not be empty");
    }
    let status = match rules.matches(&domain, std::slice::from_ref(&descriptor)) {
        Ok(mut matched) => match matched.pop().flatten() {
            Some(m) => match decide(limiter, m, hits).await {
                Ok(status) => status,
                Err(message) => return Reply::error(format!("ERR {message}")),
            },
            None => Status::default(),
        },
        Err(MatchError::UnknownDomain(_)) => Status::default(),
        Err(other) => return Reply::error(format!("ERR {other}")),
    };
    render(&status, shadow)
}

/// `domain`, the entries, and the hits (1 unless `HITS n` ends the command).
fn parse(args: &[Bytes]) -> Result<(String, Descriptor, u64), String> {
    let text = |arg: &Bytes, what: &str| {
        String::from_utf8(arg.to_vec()).map_err(|_| format!("{what} is not valid UTF-8"))
    };
    let domain = text(&args[1], "the domain")?;
    let mut rest = &args[2..];
    let mut hits = 1;
    if rest.len() >= 4
        && rest.len().is_multiple_of(2)
        && rest[rest.len() - 2].eq_ignore_ascii_case(b"hits")
    {
        let n = &rest[rest.len() - 1];
        hits = super::args::int(n)
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| format!("HITS must be a non-negative integer, not '{}'", lossy(n)))?;
        weir_config::limits::check_hits_addend(hits).map_err(|e| e.to_string())?;
        rest = &rest[..rest.len() - 2];
    }
    if !rest.len().is_multiple_of(2) {
        return Err(
            "wrong number of arguments for 'weir.check' command: entries come in key value pairs"
                .into(),
        );
    }
    let entries = rest
        .chunks(2)
        .map(|pair| {
            Ok((
                text(&pair[0], "an entry's key")?,
                text(&pair[1], "an entry's value")?,
            ))
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok((domain, Descriptor::new(entries), hits))
}

/// `Engine::decide_one`.
async fn decide<L, S, C>(limiter: &L, m: Matched, hits: u64) -> Result<Status, String>
where
    L: std::ops::Deref<Target = Limiter<S, C>>,
    S: Store,
    C: Clock,
{
    let (decision, never_allowed) = match m.limit {
        Limit::Rule(rule) => check_one(limiter, &m.key, &rule, m.hits(hits), &m.rule_id).await?,
        Limit::Deny { window } => (deny_all(window, limiter.clock().now_ns()), false),
        _ => {
            return Ok(Status {
                matched: Some(m),
                ..Status::default()
            })
        }
    };
    if decision.allowed {
        return Ok(Status {
            matched: Some(m),
            decision: Some(decision),
            ..Status::default()
        });
    }
    let enforces = !m.shadow && enforced(&m.key, m.enforce_percent);
    Ok(Status {
        over: enforces,
        shadow_denied: !enforces,
        matched: Some(m),
        decision: Some(decision),
        never_allowed,
    })
}

/// `Engine::check`: one limiter check, with the errors that are decisions turned into them.
async fn check_one<L, S, C>(
    limiter: &L,
    key: &Key,
    rule: &weir_core::Rule,
    hits: u64,
    rule_id: &str,
) -> Result<(Decision, bool), String>
where
    L: std::ops::Deref<Target = Limiter<S, C>>,
    S: Store,
    C: Clock,
{
    match limiter.check(key, rule, hits).await {
        Ok(decision) => Ok((decision, false)),
        Err(CheckError::CostAboveCapacity { .. }) => {
            let now = limiter.peek(key, rule).await.ok();
            let reset_after = now.map_or(rule.window(), |d| d.reset_after);
            let retry_after = if reset_after.is_zero() { rule.window() } else { reset_after };
            Ok((
                Decision {
                    allowed: false,
                    limit: rule.limit(),
                    remaining: now.map_or(0, |d| d.remaining),
                    reset_after,
                    retry_after,
                    delay: Duration::ZERO,
                },
                true,
            ))
        }
        Err(CheckError::Store(error @ StoreError::Full { .. })) => match rule.failure_policy() {
            FailurePolicy::FailOpen => Ok((
                Decision {
                    allowed: true,
                    limit: rule.limit(),
                    remaining: 0,
                    reset_after: Duration::ZERO,
                    retry_after: Duration::ZERO,
                    delay: Duration::ZERO,
                },
                false,
            )),
            _ => Err(format!(
                "store unavailable: {error}; rule {rule_id} fails closed for new keys until some expire"
            )),
        },
        Err(CheckError::Store(error)) => Err(format!("store unavailable: {error}")),
        Err(CheckError::Unsupported { op, algorithm }) => Err(if algorithm == "concurrency" {
            format!(
                "rule {rule_id}: a concurrency rule counts leases, not requests: acquire and \
                 release them over HTTP (POST /v1/acquire, POST /v1/release)"
            )
        } else {
            format!("rule {rule_id}: {op} is not supported by the {algorithm} algorithm")
        }),
        Err(other) => Err(other.to_string()),
    }
}

/// `weir-server`'s `deny_all`: a `requests_per_unit: 0` rule, denied until the end of its
/// epoch-aligned window.
fn deny_all(window: Duration, now_ns: u64) -> Decision {
    let window_ns = u64::try_from(window.as_nanos()).unwrap_or(u64::MAX).max(1);
    let until_end = Duration::from_nanos(window_ns - now_ns % window_ns);
    Decision {
        allowed: false,
        limit: 0,
        remaining: 0,
        reset_after: until_end,
        retry_after: until_end,
        delay: Duration::ZERO,
    }
}

/// `weir-server`'s `enforced`: whether a denial of `key` falls in the enforced share of
/// keys (unseeded FNV-1a over the key, 0 to 99, below `percent`); the same on every
/// instance and in every front end.
fn enforced(key: &Key, percent: u8) -> bool {
    if percent >= 100 {
        return true;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key.as_bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash % 100 < u64::from(percent)
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn count(n: u64) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The verdict as `/v1/check`'s fields.
fn render(status: &Status, shadow: bool) -> Reply {
    let code = |over: bool| Reply::name(if over { "OVER_LIMIT" } else { "OK" });
    let mut fields = vec![
        (Reply::name("overall_code"), code(status.over && !shadow)),
        (Reply::name("code"), code(status.over)),
        (
            Reply::name("rule"),
            status
                .matched
                .as_ref()
                .map_or(Reply::Null, |m| Reply::text(&*m.rule_id)),
        ),
    ];
    if let Some(name) = status.matched.as_ref().and_then(|m| m.name.as_deref()) {
        fields.push((Reply::name("name"), Reply::text(name)));
    }
    if status.matched.as_ref().is_some_and(Matched::is_unlimited) {
        fields.push((Reply::name("unlimited"), Reply::Int(1)));
    }
    if let Some(d) = &status.decision {
        fields.push((Reply::name("limit"), count(d.limit)));
        fields.push((Reply::name("remaining"), count(d.remaining)));
        fields.push((
            Reply::name("reset_after_ms"),
            Reply::Int(millis(d.reset_after)),
        ));
        if !status.never_allowed {
            fields.push((
                Reply::name("retry_after_ms"),
                Reply::Int(millis(d.retry_after)),
            ));
        }
        if millis(d.delay) > 0 {
            fields.push((Reply::name("delay_ms"), Reply::Int(millis(d.delay))));
        }
    }
    // Under the server's shadow mode an enforced denial is reported as not enforced too.
    if status.shadow_denied || (shadow && status.over) {
        fields.push((Reply::name("shadow_denied"), Reply::Int(1)));
    }
    if status.never_allowed {
        fields.push((Reply::name("never_allowed"), Reply::Int(1)));
    }
    Reply::Map(fields)
}
