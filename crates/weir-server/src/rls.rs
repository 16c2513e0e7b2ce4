//! Envoy's rate limit service messages (`envoy.service.ratelimit.v3`) to and from the
//! server's terms: a `RateLimitRequest` becomes a [`CheckRequest`], a [`Verdict`] becomes a
//! `RateLimitResponse`. Shared by the gRPC service and the `/json` endpoint, which speaks
//! the same messages in protobuf JSON.
//!
//! Each status is rendered as envoyproxy/ratelimit renders it:
//! - `current_limit`: a `rate_limit` rule (or a limit override) as written; with a
//!   `unit_multiplier`, or for a Weir rule, the nearest Envoy unit (`envoy_unit.rs`);
//! - `limit_remaining`: what is left after this request, `0` for any denial (shadow ones
//!   included, and a request whose hits alone exceed the whole limit), `u32::MAX` for an
//!   unlimited rule;
//! - `duration_until_reset`: whole seconds, rounded up: for a `rate_limit` rule exactly
//!   ratelimit's `unit − now_s % unit` (1 s for a `second` rule, whatever the instant);
//!   for a Weir rule its reset when allowed, its retry-after when denied.
//!
//! A descriptor no rule matched (an unknown domain's included) is `OK` with nothing else.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as EnvoyUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as EnvoyCode, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use weir_config::{Descriptor, LimitOverride, Unit};

use crate::envoy_unit::envoy_limit;
use crate::headers::{ceil_secs, ResponseHeaders};
use weir_engine::{CheckRequest, DecideError};
use weir_engine::{Code, Status, Verdict};

/// Converts Envoy's request. Fails on what Weir cannot honour (negative hits, an unknown
/// unit in a limit override), naming the descriptor.
pub fn check_request(request: RateLimitRequest) -> Result<CheckRequest, DecideError> {
    let descriptors = request
        .descriptors
        .into_iter()
        .enumerate()
        .map(|(i, d)| descriptor(i, d))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(CheckRequest {
        domain: request.domain,
        descriptors,
        hits_addend: u64::from(request.hits_addend),
    })
}

fn descriptor(i: usize, d: RateLimitDescriptor) -> Result<Descriptor, DecideError> {
    if d.is_negative_hits {
        return Err(DecideError::Invalid(format!(
            "descriptors[{i}]: is_negative_hits is not supported"
        )));
    }
    let limit = match d.limit {
        None => None,
        Some(limit) => Some(LimitOverride {
            requests_per_unit: u64::from(limit.requests_per_unit),
            unit: unit(limit.unit).ok_or_else(|| {
                DecideError::Invalid(format!(
                    "descriptors[{i}].limit.unit: {} is not a time unit",
                    EnvoyUnit::try_from(limit.unit).map_or("unknown", |u| u.as_str_name())
                ))
            })?,
        }),
    };
    Ok(Descriptor {
        entries: d.entries.into_iter().map(|e| (e.key, e.value)).collect(),
        hits_addend: d.hits_addend.map(|h| h.value),
        limit,
    })
}

/// Envoy's unit number as a `weir_config::Unit` (`None` for `UNKNOWN` or out of range).
fn unit(n: i32) -> Option<Unit> {
    Some(match EnvoyUnit::try_from(n).ok()? {
        EnvoyUnit::Second => Unit::Second,
        EnvoyUnit::Minute => Unit::Minute,
        EnvoyUnit::Hour => Unit::Hour,
        EnvoyUnit::Day => Unit::Day,
        EnvoyUnit::Week => Unit::Week,
        EnvoyUnit::Month => Unit::Month,
        EnvoyUnit::Year => Unit::Year,
        EnvoyUnit::Unknown => return None,
    })
}

fn envoy_unit(unit: Unit) -> EnvoyUnit {
    match unit {
        Unit::Second => EnvoyUnit::Second,
        Unit::Minute => EnvoyUnit::Minute,
        Unit::Hour => EnvoyUnit::Hour,
        Unit::Day => EnvoyUnit::Day,
        Unit::Week => EnvoyUnit::Week,
        Unit::Month => EnvoyUnit::Month,
        Unit::Year => EnvoyUnit::Year,
        _ => EnvoyUnit::Unknown,
    }
}

fn code(code: Code) -> i32 {
    match code {
        Code::Ok => EnvoyCode::Ok as i32,
        Code::OverLimit => EnvoyCode::OverLimit as i32,
    }
}

fn status(s: &Status) -> DescriptorStatus {
    let mut out = DescriptorStatus {
        code: code(s.code),
        ..DescriptorStatus::default()
    };
    if s.is_unlimited() {
        // As envoyproxy/ratelimit: OK with the largest remaining it can express.
        out.limit_remaining = u32::MAX;
        return out;
    }
    let (Some(m), Some(d)) = (&s.matched, &s.decision) else {
        return out;
    };
    // A ratelimit rule is answered as written; a Weir rule (or a `unit_multiplier`, which
    // Envoy's units cannot say) in the nearest unit.
    let (requests_per_unit, unit) = match m.rate_limit {
        Some(spec) if spec.unit_multiplier == 1 => (
            u32::try_from(spec.requests_per_unit).unwrap_or(u32::MAX),
            envoy_unit(spec.unit) as i32,
        ),
        _ => {
            let limit = envoy_limit(d.limit, m.window());
            (limit.requests_per_unit, limit.unit as i32)
        }
    };
    out.current_limit = Some(RateLimit {
        name: m.name.as_deref().unwrap_or_default().to_string(),
        requests_per_unit,
        unit,
    });
    // As ratelimit: nothing remains once denied, shadow or not, even when the request
    // alone asked more than the whole limit.
    out.limit_remaining = if d.allowed {
        u32::try_from(d.remaining).unwrap_or(u32::MAX)
    } else {
        0
    };
    let until = if d.allowed {
        d.reset_after
    } else {
        d.retry_after
    };
    out.duration_until_reset = Some(whole_seconds(until));
    out
}

/// `duration_until_reset` in whole seconds, rounded up. For a fixed window aligned to the
/// epoch (every `rate_limit` rule) this is ratelimit's own `unit − now_s % unit`: the
/// window ends at a whole second, so rounding the exact time left up gives what ratelimit
/// computes from the current Unix second. Envoy reads it in whole seconds too.
fn whole_seconds(until: std::time::Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(ceil_secs(until)).unwrap_or(i64::MAX),
        nanos: 0,
    }
}

/// Renders a verdict as Envoy's response, with the rate-limit headers `headers` asks for.
pub fn response(verdict: &Verdict, headers: &ResponseHeaders) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code(verdict.overall),
        statuses: verdict.statuses.iter().map(status).collect(),
        response_headers_to_add: headers
            .render(verdict)
            .into_iter()
            .map(|(key, value)| HeaderValue {
                key,
                value,
                ..HeaderValue::default()
            })
            .collect(),
        ..RateLimitResponse::default()
    }
}
