//! The answers the layer gives itself, without calling the inner service: `429` when a
//! limit rejects, `503` when the in-flight limit is full or the limiter cannot decide. Each
//! carries a small body (JSON, or plain text when the client asks only for text) and, for a
//! `429`, `Retry-After` and the rate-limit headers. A gRPC request (`content-type:
//! application/grpc…`) gets a gRPC answer instead: HTTP 200 with no body and `grpc-status`
//! `RESOURCE_EXHAUSTED` (8) or `UNAVAILABLE` (14) in the headers (a trailers-only response,
//! which every gRPC client reads as that status), the rate-limit headers beside it.

use std::time::Duration;

use http::header::{HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, RETRY_AFTER};
use http::request::Parts;
use http::{Response, StatusCode};

use crate::headers::{ceil_secs, rate_limit_headers, HeaderStyle};
use crate::limits::Evaluation;

/// Why the layer answered by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// A limit denied (after any queueing): 429.
    Limited,
    /// The queue of this key is full: 429.
    QueueFull,
    /// The in-flight limit stayed full for the longest wait: 503.
    Busy,
    /// The limiter failed and the rules say not to let the request through: 503.
    Unavailable,
}

impl Refusal {
    fn status(self) -> StatusCode {
        match self {
            Self::Limited | Self::QueueFull => StatusCode::TOO_MANY_REQUESTS,
            Self::Busy | Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The gRPC status code of the refusal.
    fn grpc_status(self) -> u16 {
        match self {
            Self::Limited | Self::QueueFull => 8, // RESOURCE_EXHAUSTED
            Self::Busy | Self::Unavailable => 14, // UNAVAILABLE
        }
    }

    fn message(self) -> &'static str {
        match self {
            Self::Limited => "rate limit exceeded",
            Self::QueueFull => "rate limit exceeded and too many requests already waiting",
            Self::Busy => "too many requests in flight; try again shortly",
            Self::Unavailable => "rate limiter unavailable",
        }
    }
}

/// The response for a refusal. `evaluation` gives the headers and the retry time (none for
/// `Busy` / `Unavailable`, which say `Retry-After: 1`).
pub(crate) fn refuse<B: RefusalBody>(
    refusal: Refusal,
    request: &Parts,
    evaluation: Option<&Evaluation>,
    style: HeaderStyle,
) -> Response<B> {
    let retry_after = evaluation
        .map(Evaluation::retry_after)
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(1));
    let retry_secs = ceil_secs(retry_after).max(1);
    let limit = evaluation
        .and_then(|e| crate::headers::tightest(&e.applied))
        .filter(|a| !a.decision.allowed)
        .map(|a| a.name.to_string());
    if is_grpc(request) {
        let mut response = Response::new(B::from_text(String::new()));
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert("grpc-status", HeaderValue::from(refusal.grpc_status()));
        // grpc-message is percent-encoded; these messages need only their spaces encoded.
        if let Ok(message) = HeaderValue::try_from(refusal.message().replace(' ', "%20")) {
            headers.insert("grpc-message", message);
        }
        headers.insert(RETRY_AFTER, HeaderValue::from(retry_secs));
        if let Some(evaluation) = evaluation {
            add_rate_limit_headers(headers, evaluation, style);
        }
        return response;
    }
    let (content_type, body) = if wants_text(request) {
        (
            "text/plain; charset=utf-8",
            format!("{}\n", refusal.message()),
        )
    } else {
        let mut body = serde_json::json!({
            "error": refusal.message(),
            "retry_after_ms": u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX),
        });
        if let Some(limit) = limit {
            body["limit"] = serde_json::Value::String(limit);
        }
        ("application/json", body.to_string())
    };
    let mut response = Response::new(B::from_text(body));
    *response.status_mut() = refusal.status();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(RETRY_AFTER, HeaderValue::from(retry_secs));
    if let Some(evaluation) = evaluation {
        add_rate_limit_headers(headers, evaluation, style);
    }
    response
}

/// Adds the rate-limit headers of `evaluation` to `headers`.
pub(crate) fn add_rate_limit_headers(
    headers: &mut http::HeaderMap,
    evaluation: &Evaluation,
    style: HeaderStyle,
) {
    for (name, value) in rate_limit_headers(&evaluation.applied, style) {
        if let (Some(name), Ok(value)) = (header_name(name), HeaderValue::try_from(value)) {
            headers.insert(name, value);
        }
    }
}

/// The name of a rate-limit header, without parsing it again on every response.
fn header_name(name: &'static str) -> Option<HeaderName> {
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

/// A response body the layer can write its own answers in. Implemented for axum's and
/// tonic's bodies (feature `tonic`, on by default), `String` and `Full<Bytes>`; implement it
/// for your own body type to use the layer with it.
pub trait RefusalBody: Sized {
    /// A body holding `text` (empty for gRPC answers).
    fn from_text(text: String) -> Self;
}

impl RefusalBody for axum::body::Body {
    fn from_text(text: String) -> Self {
        Self::from(text)
    }
}

impl RefusalBody for String {
    fn from_text(text: String) -> Self {
        text
    }
}

impl RefusalBody for http_body_util::Full<bytes::Bytes> {
    fn from_text(text: String) -> Self {
        Self::new(bytes::Bytes::from(text))
    }
}

#[cfg(feature = "tonic")]
impl RefusalBody for tonic::body::Body {
    fn from_text(text: String) -> Self {
        if text.is_empty() {
            Self::empty()
        } else {
            Self::new(http_body_util::Full::new(bytes::Bytes::from(text)))
        }
    }
}

/// A gRPC request: its content type is `application/grpc` or `application/grpc+…`.
fn is_grpc(request: &Parts) -> bool {
    request
        .headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("application/grpc"))
}

/// True when the client accepts text but not JSON (e.g. `Accept: text/plain`, or
/// `text/html` from a browser).
fn wants_text(request: &Parts) -> bool {
    let Some(accept) = request.headers.get(ACCEPT).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let accept = accept.to_ascii_lowercase();
    accept.contains("text/") && !accept.contains("json") && !accept.contains("*/*")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn browsers_get_text_and_api_clients_json() {
        let parts = |accept: &str| {
            http::Request::builder()
                .header(ACCEPT, accept)
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        assert!(wants_text(&parts("text/html,application/xhtml+xml")));
        assert!(!wants_text(&parts("application/json")));
        assert!(!wants_text(&parts("*/*")));
        let r: Response<String> = refuse(
            Refusal::Busy,
            &parts("text/plain"),
            None,
            HeaderStyle::default(),
        );
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[RETRY_AFTER], "1");
        assert_eq!(r.body(), "too many requests in flight; try again shortly\n");
    }
}
