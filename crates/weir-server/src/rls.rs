//! Envoy's rate limit service messages (`envoy.service.ratelimit.v3`) to and from the
//! server's terms: a `RateLimitRequest` becomes a [`CheckRequest`], a [`Verdict`] becomes a
//! `RateLimitResponse`. Shared by the gRPC service and the `/json` endpoint, which speaks
//! the same messages in protobuf JSON.

use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as EnvoyUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code as EnvoyCode, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use weir_config::{Descriptor, LimitOverride, Unit};

use crate::decide::{CheckRequest, DecideError};
use crate::envoy_unit::envoy_limit;
use crate::headers::{rate_limit_headers, HeaderStyle};
use crate::verdict::{Code, Status, Verdict};

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

/// A duration as protobuf's `Duration` (saturating at `i64::MAX` seconds).
pub fn proto_duration(d: std::time::Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
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
    // A ratelimit rule is answered as written; a Weir rule in the nearest unit.
    let (requests_per_unit, unit) = match m.rate_limit {
        Some(spec) => (
            u32::try_from(spec.requests_per_unit).unwrap_or(u32::MAX),
            envoy_unit(spec.unit) as i32,
        ),
        None => {
            let limit = envoy_limit(d.limit, m.window());
            (limit.requests_per_unit, limit.unit as i32)
        }
    };
    out.current_limit = Some(RateLimit {
        name: m.name.as_deref().unwrap_or_default().to_string(),
        requests_per_unit,
        unit,
    });
    out.limit_remaining = u32::try_from(d.remaining).unwrap_or(u32::MAX);
    let until = if d.allowed {
        d.reset_after
    } else {
        d.retry_after
    };
    out.duration_until_reset = Some(proto_duration(until));
    out
}

/// Renders a verdict as Envoy's response, with the rate-limit headers `style` asks for.
pub fn response(verdict: &Verdict, style: HeaderStyle) -> RateLimitResponse {
    RateLimitResponse {
        overall_code: code(verdict.overall),
        statuses: verdict.statuses.iter().map(status).collect(),
        response_headers_to_add: rate_limit_headers(verdict, style)
            .into_iter()
            .map(|(key, value)| HeaderValue {
                key: key.to_string(),
                value,
                ..HeaderValue::default()
            })
            .collect(),
        ..RateLimitResponse::default()
    }
}
