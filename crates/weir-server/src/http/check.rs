//! `POST /v1/check`: Weir's own JSON API for services that are not behind Envoy.
//!
//! ```text
//! {"domain": "api",
//!  "descriptors": [{"entries": [{"key": "user", "value": "alice"}], "hits_addend": 2}],
//!  "hits": 1}
//! ```
//!
//! answers `200` (or `429` when over the limit) with the overall code and each descriptor's
//! decision, and the rate-limit headers (`RateLimit-Policy`, `RateLimit`, `Retry-After` on
//! 429). Hits above a rule's capacity can never pass: that descriptor says
//! `"never_allowed": true` (no `retry_after_ms`) and the 429 has no `Retry-After`. Unknown fields, wrong types, negative or absurd hits are a 400 that names them.
//! The body must be sent as `Content-Type: application/json` (`415` otherwise): a web page
//! can POST `text/plain` or a form cross-site without asking, JSON it cannot.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use weir_config::{Descriptor, LimitOverride, Unit};

use super::body::{parse, JsonType, RawBody};
use super::error::ApiError;
use crate::app::App;
use crate::headers::{ceil_secs, verdict_headers};
use weir_engine::CheckRequest;
use weir_engine::{Code, Status, Verdict};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckBody {
    pub(crate) domain: String,
    pub(crate) descriptors: Vec<DescriptorBody>,
    /// Units this request uses (default 1).
    #[serde(default, alias = "hits_addend")]
    pub(crate) hits: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DescriptorBody {
    pub(crate) entries: Vec<EntryBody>,
    #[serde(default)]
    pub(crate) hits_addend: Option<u64>,
    #[serde(default)]
    pub(crate) limit: Option<LimitBody>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EntryBody {
    pub(crate) key: String,
    pub(crate) value: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitBody {
    requests_per_unit: u64,
    unit: String,
}

impl CheckBody {
    /// The request in the engine's terms; a bad unit is a 400 naming the descriptor.
    pub(crate) fn into_request(self) -> Result<CheckRequest, ApiError> {
        let descriptors = self
            .descriptors
            .into_iter()
            .enumerate()
            .map(|(i, d)| d.into_descriptor(i))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CheckRequest {
            domain: self.domain,
            descriptors,
            hits_addend: self.hits.unwrap_or(1),
        })
    }
}

impl DescriptorBody {
    pub(crate) fn into_descriptor(self, i: usize) -> Result<Descriptor, ApiError> {
        let limit = match self.limit {
            None => None,
            Some(l) => Some(LimitOverride {
                requests_per_unit: l.requests_per_unit,
                unit: Unit::parse(&l.unit).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "descriptors[{i}].limit.unit: '{}' is not one of second, minute, hour, day, week, month, year",
                        l.unit
                    ))
                })?,
            }),
        };
        Ok(Descriptor {
            entries: self.entries.into_iter().map(|e| (e.key, e.value)).collect(),
            hits_addend: self.hits_addend,
            limit,
        })
    }
}

#[derive(Debug, Serialize)]
struct CheckAnswer<'a> {
    overall_code: &'static str,
    descriptors: Vec<DescriptorAnswer<'a>>,
}

#[derive(Debug, Serialize)]
struct DescriptorAnswer<'a> {
    code: &'static str,
    /// The matched rule's id; `null` when no rule matched.
    rule: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    unlimited: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    limit: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    remaining: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reset_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    /// Denied by the limiter but not enforced (shadow mode or roll-out).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    shadow_denied: bool,
    /// The hits are above the rule's capacity: no retry can pass (no `retry_after_ms`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    never_allowed: bool,
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn answer(status: &Status) -> DescriptorAnswer<'_> {
    let d = status.decision.as_ref();
    DescriptorAnswer {
        code: status.code.as_str(),
        rule: status.matched.as_ref().map(|m| &*m.id),
        name: status.matched.as_ref().and_then(|m| m.name.as_deref()),
        unlimited: status.is_unlimited(),
        limit: d.map(|d| d.limit),
        remaining: d.map(|d| d.remaining),
        reset_after_ms: d.map(|d| millis(d.reset_after)),
        retry_after_ms: d
            .filter(|_| !status.never_allowed)
            .map(|d| millis(d.retry_after)),
        delay_ms: d.map(|d| millis(d.delay)).filter(|&ms| ms > 0),
        shadow_denied: status.shadow_denied,
        never_allowed: status.never_allowed,
    }
}

/// Renders a verdict as the `/v1/check` response: status, headers and body.
pub(crate) fn render(app: &App, verdict: &Verdict) -> Response {
    let over = verdict.overall == Code::OverLimit;
    let status = if over {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    let body = CheckAnswer {
        overall_code: verdict.overall.as_str(),
        descriptors: verdict.statuses.iter().map(answer).collect(),
    };
    let mut response = (status, Json(body)).into_response();
    let headers = response.headers_mut();
    for (name, value) in verdict_headers(verdict, app.settings().headers) {
        // The header's own bytes, not a copy (values are printable ASCII by construction).
        if let Ok(value) = HeaderValue::from_maybe_shared(Bytes::from(value)) {
            headers.insert(HeaderName::from_static(name), value);
        }
    }
    // A request one enforced descriptor can never allow gets no Retry-After: a client
    // honouring it would only be refused again, in a loop.
    let never = verdict
        .statuses
        .iter()
        .any(|s| s.never_allowed && s.code == Code::OverLimit);
    if over && !never {
        if let Some((_, d)) = verdict.tightest() {
            headers.insert(
                axum::http::header::RETRY_AFTER,
                HeaderValue::from(ceil_secs(d.retry_after)),
            );
        }
    }
    response
}

/// `POST /v1/check`.
pub(crate) async fn handle(
    State(app): State<App>,
    JsonType(json): JsonType,
    RawBody(body): RawBody,
) -> Response {
    let metrics = app.engine().metrics();
    let result = async {
        json?;
        let request = parse::<CheckBody>(&body)?.into_request()?;
        Ok::<_, ApiError>(app.engine().decide(&request).await?)
    }
    .await;
    match result {
        Ok(verdict) => {
            let over = verdict.overall == Code::OverLimit;
            metrics.request("http", if over { "over_limit" } else { "ok" });
            render(&app, &verdict)
        }
        Err(error) => {
            let invalid = error.status.is_client_error();
            metrics.request("http", if invalid { "invalid" } else { "error" });
            error.into_response()
        }
    }
}
