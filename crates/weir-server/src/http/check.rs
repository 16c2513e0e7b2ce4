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
//! 429). A denial made because the store is down and the rule fails closed says so: the
//! descriptor's `"reason": "store_unavailable"` and an `x-weir-reason: store-unavailable`
//! header. Hits above a rule's capacity can never pass: that descriptor says
//! `"never_allowed": true` (no `retry_after_ms`) and the 429 has no `Retry-After`. Unknown fields, wrong types, negative or absurd hits are a 400 that names them.
//! The body must be sent as `Content-Type: application/json` (`415` otherwise): a web page
//! can POST `text/plain` or a form cross-site without asking, JSON it cannot.

use std::borrow::Cow;
use std::cell::RefCell;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::header::{CONTENT_TYPE, RETRY_AFTER};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::Full;
use serde::Deserialize;
use weir_config::{Descriptor, LimitOverride, Unit};

use super::json_out::{write_array, JsonObject};
use crate::app::App;
use crate::headers::{ceil_secs, put_verdict_headers, REASON_HEADER, STORE_UNAVAILABLE};
use weir_engine::CheckRequest;
use weir_engine::{Code, Status, Verdict};
use weir_listen::http::ApiError;
use weir_listen::http::{parse, EntryBody, JsonType, RawBody};

/// The body, its strings borrowed from the request's bytes where JSON needs no unescaping
/// (the common case: no string to allocate and copy per request).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CheckBody<'a> {
    #[serde(borrow)]
    pub(crate) domain: Cow<'a, str>,
    #[serde(borrow)]
    pub(crate) descriptors: Vec<DescriptorBody<'a>>,
    /// Units this request uses (default 1).
    #[serde(default, alias = "hits_addend")]
    pub(crate) hits: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DescriptorBody<'a> {
    #[serde(borrow)]
    pub(crate) entries: Vec<EntryBody<'a>>,
    #[serde(default)]
    pub(crate) hits_addend: Option<u64>,
    #[serde(default)]
    pub(crate) limit: Option<LimitBody>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitBody {
    requests_per_unit: u64,
    unit: String,
}

impl<'a> CheckBody<'a> {
    /// The request in the engine's terms, still borrowing the body's strings; a bad unit is
    /// a 400 naming the descriptor.
    pub(crate) fn into_request(self) -> Result<CheckRequest<Cow<'a, str>>, ApiError> {
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

impl<'a> DescriptorBody<'a> {
    pub(crate) fn into_descriptor(self, i: usize) -> Result<Descriptor<Cow<'a, str>>, ApiError> {
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

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Writes the answer's JSON body: `{"overall_code": …, "descriptors": [ … ]}`, one object
/// per descriptor in the request's order with `code` and `rule` (the matched rule's id,
/// `null` when none matched), then only the fields that apply: `name`, `unlimited`,
/// `limit`, `remaining`, `reset_after_ms`, `retry_after_ms` (absent when the hits can never
/// pass), `delay_ms` (when above 0), `shadow_denied` (denied but not enforced: shadow mode
/// or roll-out), `never_allowed` (the hits are above the rule's capacity), `reason`
/// (`"store_unavailable"`: denied without the store, which is down, under a rule that
/// fails closed; no limit was reached). Written by hand,
/// once per decision: it is on every request's path.
fn write_answer(out: &mut Vec<u8>, verdict: &Verdict) {
    let mut answer = JsonObject::open(out);
    answer.str_field("overall_code", verdict.overall.as_str());
    write_array(answer.field("descriptors"), &verdict.statuses, write_status);
    answer.close();
}

fn write_status(out: &mut Vec<u8>, status: &Status) {
    let mut object = JsonObject::open(out);
    object.str_field("code", status.code.as_str());
    match &status.matched {
        Some(m) => object.str_field("rule", &m.id),
        None => object.field("rule").extend_from_slice(b"null"),
    }
    if let Some(name) = status.matched.as_ref().and_then(|m| m.name.as_deref()) {
        object.str_field("name", name);
    }
    if status.is_unlimited() {
        object.true_field("unlimited");
    }
    if let Some(d) = &status.decision {
        object.u64_field("limit", d.limit);
        object.u64_field("remaining", d.remaining);
        object.u64_field("reset_after_ms", millis(d.reset_after));
        if !status.never_allowed {
            object.u64_field("retry_after_ms", millis(d.retry_after));
        }
        let delay = millis(d.delay);
        if delay > 0 {
            object.u64_field("delay_ms", delay);
        }
    }
    if status.shadow_denied {
        object.true_field("shadow_denied");
    }
    if status.never_allowed {
        object.true_field("never_allowed");
    }
    if status.failed_closed {
        object.str_field("reason", "store_unavailable");
    }
    object.close();
}

/// The answer's body, written into this thread's buffer and copied out at its exact size:
/// one allocation per answer (a vector of a guessed size turned into `Bytes` takes two).
/// The buffer is kept for the next answer unless an unusually long one grew it past
/// `KEPT_BYTES`.
fn written_body(verdict: &Verdict) -> Bytes {
    const KEPT_BYTES: usize = 16 * 1024;
    thread_local! {
        static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    }
    BUFFER.with_borrow_mut(|buffer| {
        buffer.clear();
        write_answer(buffer, verdict);
        let body = Bytes::copy_from_slice(buffer);
        if buffer.capacity() > KEPT_BYTES {
            *buffer = Vec::new();
        }
        body
    })
}

/// A rate-limit header's name: the ones every answer carries are constants, made when
/// compiling (`HeaderName::from_static` on a runtime string looks it up in the standard
/// names and checks its bytes, on every response).
fn header_name(name: &'static str) -> HeaderName {
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const LIVE: HeaderName = HeaderName::from_static("ratelimit");
    match name {
        "ratelimit" => LIVE,
        "ratelimit-policy" => POLICY,
        other => HeaderName::from_static(other),
    }
}

/// Renders a verdict as the `/v1/check` response: status, headers and body.
pub(crate) fn render(app: &App, verdict: &Verdict) -> Response<Full<Bytes>> {
    let over = verdict.overall == Code::OverLimit;
    let body = written_body(verdict);
    let mut headers = HeaderMap::with_capacity(4 + usize::from(over));
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    put_verdict_headers(verdict, app.settings().headers, |name, value| {
        // The header's own bytes, not a copy (values are printable ASCII by construction).
        if let Ok(value) = HeaderValue::from_maybe_shared(value) {
            headers.insert(header_name(name), value);
        }
    });
    // A request one enforced descriptor can never allow gets no Retry-After: a client
    // honouring it would only be refused again, in a loop.
    let never = verdict
        .statuses
        .iter()
        .any(|s| s.never_allowed && s.code == Code::OverLimit);
    if over && !never {
        if let Some((_, d)) = verdict.tightest() {
            headers.insert(RETRY_AFTER, HeaderValue::from(ceil_secs(d.retry_after)));
        }
    }
    if over && verdict.failed_closed() {
        headers.insert(
            HeaderName::from_static(REASON_HEADER),
            HeaderValue::from_static(STORE_UNAVAILABLE),
        );
    }
    let mut response = Response::new(Full::new(body));
    *response.headers_mut() = headers;
    if over {
        *response.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    }
    response
}

/// A `/v1/check` body as the engine's request, its strings borrowed from `body`: read by
/// hand when it has the common shape (`check_fast.rs`), else by `serde_json`, which
/// also words every 400.
pub(crate) fn check_request(body: &[u8]) -> Result<CheckRequest<Cow<'_, str>>, ApiError> {
    match super::check_fast::read(body) {
        Some(request) => Ok(request),
        None => parse::<CheckBody>(body)?.into_request(),
    }
}

/// `POST /v1/check` once its body has arrived, for both ways in (the router's [`handle`]
/// and the listener's direct route, `direct.rs`): the content type (`json`, read from the
/// head), the body, the decision, and the answer or the error, counted in the API's
/// metrics.
pub(crate) async fn answer(
    app: &App,
    json: Result<(), ApiError>,
    body: &[u8],
) -> Response<Full<Bytes>> {
    let metrics = app.engine().metrics();
    let result = async {
        json?;
        let request = check_request(body)?;
        Ok::<_, ApiError>(app.engine().decide(&request).await?)
    }
    .await;
    match result {
        Ok(verdict) => {
            let over = verdict.overall == Code::OverLimit;
            metrics.request("http", if over { "over_limit" } else { "ok" });
            render(app, &verdict)
        }
        Err(error) => {
            let invalid = error.status.is_client_error();
            metrics.request("http", if invalid { "invalid" } else { "error" });
            error.into_full()
        }
    }
}

/// `POST /v1/check` through the router (tests' `oneshot`, `weir proxy`'s API listener).
pub(crate) async fn handle(
    State(app): State<App>,
    JsonType(json): JsonType,
    RawBody(body): RawBody,
) -> axum::response::Response {
    answer(&app, json, &body).await.map(Body::new)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use serde_json::{json, Value};
    use weir_config::Limit;
    use weir_core::{Decision, Rule};
    use weir_engine::MatchedRule;

    use super::*;

    fn limited(id: &str, name: Option<&str>, decision: Decision) -> Status {
        let rule = Rule::gcra(10, Duration::from_secs(1), 10).unwrap_or_else(|_| unreachable!());
        Status {
            code: if decision.allowed {
                Code::Ok
            } else {
                Code::OverLimit
            },
            matched: Some(MatchedRule {
                id: Arc::from(id),
                name: name.map(Arc::from),
                limit: Limit::Rule(rule),
                rate_limit: None,
                shadow: false,
            }),
            decision: Some(decision),
            shadow_denied: false,
            never_allowed: false,
            failed_closed: false,
        }
    }

    fn written(verdict: &Verdict) -> Value {
        let mut out = Vec::new();
        write_answer(&mut out, verdict);
        serde_json::from_slice(&out).unwrap_or_else(|e| panic!("{e}: {out:?}"))
    }

    /// The hand-written body is valid JSON with exactly the documented fields: the ones
    /// that apply, escaped where the operator's text needs it.
    #[test]
    fn the_answer_has_the_documented_fields_and_escapes_rule_text() {
        let allowed = Decision {
            allowed: true,
            limit: 10,
            remaining: 9,
            reset_after: Duration::from_millis(1_500),
            retry_after: Duration::ZERO,
            delay: Duration::ZERO,
        };
        let denied = Decision {
            allowed: false,
            remaining: 0,
            retry_after: Duration::from_millis(250),
            delay: Duration::from_millis(7),
            ..allowed
        };
        let mut never = limited("a\"b\\c\u{1}", None, denied);
        never.never_allowed = true;
        let mut shadow = limited("s", None, denied);
        shadow.shadow_denied = true;
        shadow.code = Code::Ok;
        let mut unlimited = Status::unmatched();
        unlimited.matched = Some(MatchedRule {
            id: Arc::from("u"),
            name: None,
            limit: Limit::Unlimited,
            rate_limit: None,
            shadow: false,
        });
        let verdict = Verdict {
            overall: Code::OverLimit,
            statuses: vec![
                limited("api.ip", Some("per ip"), allowed),
                Status::unmatched(),
                never,
                shadow,
                unlimited,
            ],
        };
        assert_eq!(
            written(&verdict),
            json!({"overall_code": "OVER_LIMIT", "descriptors": [
                {"code": "OK", "rule": "api.ip", "name": "per ip", "limit": 10,
                 "remaining": 9, "reset_after_ms": 1500, "retry_after_ms": 0},
                {"code": "OK", "rule": null},
                {"code": "OVER_LIMIT", "rule": "a\"b\\c\u{1}", "limit": 10, "remaining": 0,
                 "reset_after_ms": 1500, "delay_ms": 7, "never_allowed": true},
                {"code": "OK", "rule": "s", "limit": 10, "remaining": 0, "reset_after_ms": 1500,
                 "retry_after_ms": 250, "delay_ms": 7, "shadow_denied": true},
                {"code": "OK", "rule": "u", "unlimited": true},
            ]})
        );
        let empty = Verdict {
            overall: Code::Ok,
            statuses: Vec::new(),
        };
        assert_eq!(
            written(&empty),
            json!({"overall_code": "OK", "descriptors": []})
        );
    }

    /// The body's strings are borrowed where JSON needs no unescaping and unescaped into
    /// owned strings where it does: the request the engine sees is the same either way.
    #[test]
    fn borrowed_and_escaped_strings_decode_alike() {
        let plain =
            br#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"a/b"}]}]}"#;
        let escaped =
            br#"{"domain":"\u0061pi","descriptors":[{"entries":[{"key":"us\u0065r","value":"a\/b"}]}]}"#;
        let decode = |bytes: &'static [u8]| {
            let request = weir_listen::http::parse::<CheckBody>(bytes)
                .and_then(CheckBody::into_request)
                .unwrap_or_else(|e| panic!("{}", e.message));
            let borrowed = matches!(request.domain, Cow::Borrowed(_));
            (request, borrowed)
        };
        let (a, a_borrowed) = decode(plain);
        let (b, b_borrowed) = decode(escaped);
        assert!(a_borrowed, "an unescaped string is borrowed from the body");
        assert!(!b_borrowed, "an escaped string is unescaped into its own");
        assert_eq!(a, b);
        assert_eq!(a.domain, "api");
        assert_eq!(a.descriptors[0].entries, [("user".into(), "a/b".into())]);
    }
}
