//! `POST /json`: envoyproxy/ratelimit's JSON endpoint, for clients that cannot speak gRPC
//! (Lua, scripts). Its body is a `RateLimitRequest` and its answer a `RateLimitResponse`,
//! both in protobuf's JSON mapping, as that service reads and writes them:
//!
//! - input fields by JSON name or proto name (`hitsAddend` / `hits_addend`), integers as
//!   numbers or strings, unit names or numbers; an unknown field is an error;
//! - output in lowerCamelCase with enum names, zero values left out, durations as `"1.5s"`;
//! - `200` when OK, `429` when over the limit, `400` for a bad request (the body says why,
//!   where ratelimit only says `Bad Request`).

use std::fmt::Write as _;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, Response, StatusCode};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{
    Entry, RateLimitOverride,
};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit as EnvoyUnit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code as EnvoyCode;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, UInt64Value};
use http_body_util::Full;
use serde::de::{self, Deserializer};
use serde::Deserialize;
use serde_json::Value;

use super::json_out::{write_array, JsonObject};
use crate::app::App;
use crate::headers::{REASON_HEADER, STORE_UNAVAILABLE};
use crate::rls;
use weir_engine::Code;
use weir_engine::DecideError;
use weir_listen::http::ApiError;
use weir_listen::http::{parse, RawBody};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct JsonRequest {
    #[serde(default)]
    domain: Option<String>,
    #[serde(default)]
    descriptors: Option<Vec<JsonDescriptor>>,
    #[serde(
        default,
        alias = "hits_addend",
        rename = "hitsAddend",
        deserialize_with = "uint"
    )]
    hits_addend: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonDescriptor {
    #[serde(default)]
    entries: Option<Vec<JsonEntry>>,
    #[serde(default)]
    limit: Option<JsonOverride>,
    #[serde(
        default,
        alias = "hits_addend",
        rename = "hitsAddend",
        deserialize_with = "uint"
    )]
    hits_addend: Option<u64>,
    #[serde(default, alias = "is_negative_hits", rename = "isNegativeHits")]
    is_negative_hits: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonEntry {
    #[serde(default)]
    key: Option<String>,
    #[serde(default)]
    value: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonOverride {
    #[serde(
        default,
        alias = "requests_per_unit",
        rename = "requestsPerUnit",
        deserialize_with = "uint"
    )]
    requests_per_unit: Option<u64>,
    #[serde(default)]
    unit: Option<Value>,
}

/// A protobuf JSON integer: a number or a decimal string; `null` is absent.
fn uint<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| de::Error::custom(format!("{n} is not an unsigned integer"))),
        Some(Value::String(s)) => s
            .parse()
            .map(Some)
            .map_err(|_| de::Error::custom(format!("'{s}' is not an unsigned integer"))),
        Some(other) => Err(de::Error::custom(format!(
            "{other} is not an unsigned integer"
        ))),
    }
}

fn u32_field(value: Option<u64>, place: &str) -> Result<u32, ApiError> {
    u32::try_from(value.unwrap_or(0))
        .map_err(|_| ApiError::bad_request(format!("{place} is above the uint32 range")))
}

fn unit(value: Option<&Value>, place: &str) -> Result<i32, ApiError> {
    let bad = || ApiError::bad_request(format!("{place}: not a rate limit unit"));
    match value {
        None | Some(Value::Null) => Ok(EnvoyUnit::Unknown as i32),
        Some(Value::String(name)) => EnvoyUnit::from_str_name(name)
            .map(|u| u as i32)
            .ok_or_else(bad),
        Some(Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .filter(|&n| EnvoyUnit::try_from(n).is_ok())
            .ok_or_else(bad),
        Some(_) => Err(bad()),
    }
}

impl JsonRequest {
    pub(crate) fn into_proto(self) -> Result<RateLimitRequest, ApiError> {
        let descriptors = self
            .descriptors
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, d)| d.into_proto(i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RateLimitRequest {
            domain: self.domain.unwrap_or_default(),
            descriptors,
            hits_addend: u32_field(self.hits_addend, "hitsAddend")?,
        })
    }
}

impl JsonDescriptor {
    fn into_proto(self, i: usize) -> Result<RateLimitDescriptor, ApiError> {
        let limit = match self.limit {
            None => None,
            Some(l) => Some(RateLimitOverride {
                requests_per_unit: u32_field(
                    l.requests_per_unit,
                    &format!("descriptors[{i}].limit.requestsPerUnit"),
                )?,
                unit: unit(l.unit.as_ref(), &format!("descriptors[{i}].limit.unit"))?,
            }),
        };
        Ok(RateLimitDescriptor {
            entries: self
                .entries
                .unwrap_or_default()
                .into_iter()
                .map(|e| Entry {
                    key: e.key.unwrap_or_default(),
                    value: e.value.unwrap_or_default(),
                })
                .collect(),
            limit,
            hits_addend: self.hits_addend.map(|value| UInt64Value { value }),
            is_negative_hits: self.is_negative_hits.unwrap_or(false),
        })
    }
}

/// A protobuf JSON duration: seconds with 0, 3, 6 or 9 fractional digits and an `s`.
fn duration_json(d: &ProtoDuration) -> String {
    let nanos = d.nanos.unsigned_abs();
    let mut out = d.seconds.to_string();
    if nanos != 0 {
        let _ = if nanos.is_multiple_of(1_000_000) {
            write!(out, ".{:03}", nanos / 1_000_000)
        } else if nanos.is_multiple_of(1_000) {
            write!(out, ".{:06}", nanos / 1_000)
        } else {
            write!(out, ".{nanos:09}")
        };
    }
    out.push('s');
    out
}

fn code_name(code: i32) -> &'static str {
    EnvoyCode::try_from(code).map_or("UNKNOWN", |c| c.as_str_name())
}

/// `RateLimitResponse` in protobuf's JSON mapping (zero values left out, as protojson
/// does), written straight into `out`: it is on every `/json` request's path.
fn write_response(out: &mut Vec<u8>, response: &RateLimitResponse) {
    let mut object = JsonObject::open(out);
    if response.overall_code != 0 {
        object.str_field("overallCode", code_name(response.overall_code));
    }
    if !response.statuses.is_empty() {
        write_array(object.field("statuses"), &response.statuses, |out, s| {
            let mut status = JsonObject::open(out);
            if s.code != 0 {
                status.str_field("code", code_name(s.code));
            }
            if let Some(limit) = &s.current_limit {
                let mut l = JsonObject::open(status.field("currentLimit"));
                if !limit.name.is_empty() {
                    l.str_field("name", &limit.name);
                }
                if limit.requests_per_unit != 0 {
                    l.u64_field("requestsPerUnit", u64::from(limit.requests_per_unit));
                }
                if limit.unit != 0 {
                    let unit =
                        EnvoyUnit::try_from(limit.unit).map_or("UNKNOWN", |u| u.as_str_name());
                    l.str_field("unit", unit);
                }
                l.close();
            }
            if s.limit_remaining != 0 {
                status.u64_field("limitRemaining", u64::from(s.limit_remaining));
            }
            if let Some(d) = &s.duration_until_reset {
                status.str_field("durationUntilReset", &duration_json(d));
            }
            status.close();
        });
    }
    if !response.response_headers_to_add.is_empty() {
        let headers = &response.response_headers_to_add;
        write_array(object.field("responseHeadersToAdd"), headers, |out, h| {
            let mut header = JsonObject::open(out);
            header.str_field("key", &h.key);
            header.str_field("value", &h.value);
            header.close();
        });
    }
    object.close();
}

/// ratelimit's own `400`: plain text.
fn bad_request(message: &str) -> Response<Full<Bytes>> {
    plain(
        StatusCode::BAD_REQUEST,
        "text/plain; charset=utf-8",
        format!("Bad Request: {message}\n"),
    )
}

fn plain(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// `POST /json` once its body has arrived, for both ways in (the router's [`handle`] and
/// the listener's direct route, `direct.rs`).
pub(crate) async fn answer(app: &App, body: &[u8]) -> Response<Full<Bytes>> {
    let metrics = app.engine().metrics();
    let request = match parse::<JsonRequest>(body).and_then(JsonRequest::into_proto) {
        Ok(request) => request,
        Err(error) => {
            metrics.request("json", "invalid");
            return bad_request(&error.message);
        }
    };
    let decided = match rls::check_request(request) {
        Ok(check) => app.engine().decide(&check).await,
        Err(error) => Err(error),
    };
    let verdict = match decided {
        Ok(verdict) => verdict,
        Err(DecideError::Invalid(message)) => {
            metrics.request("json", "invalid");
            return bad_request(&message);
        }
        Err(error) => {
            metrics.request("json", "error");
            return ApiError::from(error).into_full();
        }
    };
    let over = verdict.overall == Code::OverLimit;
    metrics.request("json", if over { "over_limit" } else { "ok" });
    let response = rls::response(&verdict, &app.settings().envoy_headers);
    let status = if over {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    let mut body = Vec::with_capacity(128 + 160 * response.statuses.len());
    write_response(&mut body, &response);
    let mut answer = plain(status, "application/json", body);
    // ratelimit's body has no field for it: a header says a denial is an outage's.
    if over && verdict.failed_closed() {
        answer.headers_mut().insert(
            header::HeaderName::from_static(REASON_HEADER),
            HeaderValue::from_static(STORE_UNAVAILABLE),
        );
    }
    answer
}

/// `POST /json` through the router.
pub(crate) async fn handle(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> axum::response::Response {
    answer(&app, &body).await.map(Body::new)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written body is protobuf's JSON mapping of the response: camelCase names,
    /// enum names, zero values left out, strings escaped.
    #[test]
    fn responses_are_written_in_protobuf_json() {
        use envoy_types::pb::envoy::config::core::v3::HeaderValue as EnvoyHeader;
        use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
            DescriptorStatus, RateLimit,
        };
        let response = RateLimitResponse {
            overall_code: EnvoyCode::OverLimit as i32,
            statuses: vec![
                DescriptorStatus {
                    code: EnvoyCode::Ok as i32,
                    ..DescriptorStatus::default()
                },
                DescriptorStatus {
                    code: EnvoyCode::OverLimit as i32,
                    current_limit: Some(RateLimit {
                        name: "per \"ip\"".into(),
                        requests_per_unit: 10,
                        unit: EnvoyUnit::Minute as i32,
                    }),
                    limit_remaining: 0,
                    duration_until_reset: Some(ProtoDuration {
                        seconds: 1,
                        nanos: 500_000_000,
                    }),
                    ..DescriptorStatus::default()
                },
                DescriptorStatus {
                    code: EnvoyCode::Ok as i32,
                    current_limit: Some(RateLimit::default()),
                    limit_remaining: 7,
                    ..DescriptorStatus::default()
                },
            ],
            response_headers_to_add: vec![EnvoyHeader {
                key: "RateLimit-Limit".into(),
                value: "10".into(),
                ..EnvoyHeader::default()
            }],
            ..RateLimitResponse::default()
        };
        let mut out = Vec::new();
        write_response(&mut out, &response);
        let written: Value = serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            written,
            serde_json::json!({
                "overallCode": "OVER_LIMIT",
                "statuses": [
                    {"code": "OK"},
                    {"code": "OVER_LIMIT",
                     "currentLimit": {"name": "per \"ip\"", "requestsPerUnit": 10, "unit": "MINUTE"},
                     "durationUntilReset": "1.500s"},
                    {"code": "OK", "currentLimit": {}, "limitRemaining": 7},
                ],
                "responseHeadersToAdd": [{"key": "RateLimit-Limit", "value": "10"}],
            })
        );
        let mut empty = Vec::new();
        write_response(&mut empty, &RateLimitResponse::default());
        assert_eq!(empty, b"{}");
    }

    #[test]
    fn durations_use_protobuf_json_precision() {
        let d = |seconds, nanos| duration_json(&ProtoDuration { seconds, nanos });
        assert_eq!(d(45, 0), "45s");
        assert_eq!(d(1, 500_000_000), "1.500s");
        assert_eq!(d(0, 1_000), "0.000001s");
        assert_eq!(d(0, 1), "0.000000001s");
    }
}
