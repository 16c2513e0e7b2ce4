//! `WEIR.CHECK domain key value [key value …] [HITS n]`: one descriptor checked against
//! the rule files, with the verdict `POST /v1/check` gives for the same descriptor, and the
//! same field names. The reply is a map (RESP3) or a flat array of names and values
//! (RESP2): `overall_code` and `code` (`OK` / `OVER_LIMIT`), `rule` (the matched rule's id,
//! nil when none matched), then as in `/v1/check`'s JSON `name`, `unlimited`, `limit`,
//! `remaining`, `reset_after_ms`, `retry_after_ms`, `delay_ms`, `shadow_denied`,
//! `never_allowed`, `reason` (`store_unavailable`: a fail-closed denial during a store
//! outage), each present only when the JSON has it.
//!
//! The decision is the engine's own ([`weir_engine::Engine::decide`], the path `/v1/check`
//! and Envoy's gRPC API take): the same matching, shadow and roll-out, hits above capacity,
//! store-failure judgement, metrics and top-denied keys. This file only parses the
//! command and renders the verdict.
//!
//! A trailing `HITS n` (any case) is always the option: a descriptor entry whose key is
//! `HITS` must not be the last one.

use std::time::Duration;

use bytes::Bytes;
use weir_config::Descriptor;
use weir_engine::{CheckRequest, Code, Engine, Status, Verdict};

use super::args::lossy;
use super::dispatch::{failed, Outcome};
use crate::protocol::Reply;

/// `WEIR.CHECK`.
pub(crate) async fn check(engine: &Engine, args: &[Bytes]) -> (Reply, Outcome) {
    let (domain, descriptor, hits) = match parse(args) {
        Ok(parsed) => parsed,
        Err(message) => return (Reply::error(format!("ERR {message}")), Outcome::Invalid),
    };
    let request = CheckRequest {
        domain,
        descriptors: vec![descriptor],
        hits_addend: hits,
    };
    match engine.decide(&request).await {
        Ok(verdict) => {
            let outcome = if verdict.overall == Code::OverLimit {
                Outcome::OverLimit
            } else {
                Outcome::Ok
            };
            (render(&verdict), outcome)
        }
        Err(error) => (Reply::error(format!("ERR {error}")), failed(&error)),
    }
}

/// `domain`, the entries, and the hits (1 unless `HITS n` ends the command).
pub(crate) fn parse(args: &[Bytes]) -> Result<(String, Descriptor, u64), String> {
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
        weir_config::bounds::check_hits_addend(hits).map_err(|e| e.to_string())?;
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

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

fn count(n: u64) -> Reply {
    Reply::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

/// The verdict of the one descriptor as `/v1/check`'s fields.
fn render(verdict: &Verdict) -> Reply {
    let unmatched = Status::unmatched();
    let status = verdict.statuses.first().unwrap_or(&unmatched);
    let code = |code: Code| Reply::name(code.as_str());
    let mut fields = vec![
        (Reply::name("overall_code"), code(verdict.overall)),
        (Reply::name("code"), code(status.code)),
        (
            Reply::name("rule"),
            status
                .matched
                .as_ref()
                .map_or(Reply::Null, |m| Reply::text(&*m.id)),
        ),
    ];
    if let Some(name) = status.matched.as_ref().and_then(|m| m.name.as_deref()) {
        fields.push((Reply::name("name"), Reply::text(name)));
    }
    if status.is_unlimited() {
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
    if status.shadow_denied {
        fields.push((Reply::name("shadow_denied"), Reply::Int(1)));
    }
    if status.failed_closed {
        fields.push((Reply::name("reason"), Reply::name("store_unavailable")));
    }
    if status.never_allowed {
        fields.push((Reply::name("never_allowed"), Reply::Int(1)));
    }
    Reply::Map(fields)
}
