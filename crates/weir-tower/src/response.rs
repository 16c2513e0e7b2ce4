//! The answers the layer gives itself, without calling the inner service: `429` when a
//! limit rejects, `503` when the in-flight limit is full or the limiter cannot decide. Each
//! carries a small body (JSON, or plain text when the client asks only for text) and, for a
//! `429`, `Retry-After` and the rate-limit headers. A gRPC request (`content-type:
//! application/grpc…`) gets a gRPC answer instead: HTTP 200 with no body and `grpc-status`
//! `RESOURCE_EXHAUSTED` (8) or `UNAVAILABLE` (14) in the headers (a trailers-only response,
//! which every gRPC client reads as that status), the rate-limit headers beside it.
//!
//! A layer given a refusal handler ([`RateLimitLayer::on_refusal`](crate::RateLimitLayer::on_refusal))
//! answers with the handler's response instead, plus the headers it did not set itself.

use http::header::{HeaderValue, ACCEPT, CONTENT_TYPE};
use http::request::Parts;
use http::{HeaderMap, Response, StatusCode};

use crate::limits::Evaluation;
use crate::refused::{RefusalFn, RefusalReason, Refused};
use weir_names::HeaderStyle;

/// The response to a refused request: `handler`'s if there is one (plus the headers it did
/// not set), else the layer's own; in the service's body type.
pub(crate) fn refuse<B: RefusalBody>(
    reason: RefusalReason,
    request: &Parts,
    evaluation: Option<&Evaluation>,
    style: HeaderStyle,
    handler: Option<&RefusalFn>,
) -> Response<B> {
    let refused = Refused {
        reason,
        request,
        evaluation,
        style,
    };
    let response = match handler {
        Some(handler) => {
            let mut response = handler(&refused);
            add_missing(response.headers_mut(), refused.headers());
            response
        }
        None => default_response(&refused),
    };
    response.map(B::from_text)
}

impl Refused<'_> {
    /// The layer's own answer: JSON (or plain text for a client that asks only for text),
    /// or a gRPC status for a gRPC request, with [`headers`](Self::headers). A handler can
    /// fall back to it, e.g. for gRPC requests.
    pub fn default_response(&self) -> Response<String> {
        default_response(self)
    }
}

/// The layer's own answer to a refused request (see [`Refused::default_response`]).
pub(crate) fn default_response(refused: &Refused<'_>) -> Response<String> {
    let reason = refused.reason();
    let request = refused.request();
    if is_grpc(request) {
        let mut response = Response::new(String::new());
        let headers = response.headers_mut();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
        headers.insert("grpc-status", HeaderValue::from(reason.grpc_status()));
        // grpc-message is percent-encoded; these messages need only their spaces encoded.
        if let Ok(message) = HeaderValue::try_from(reason.message().replace(' ', "%20")) {
            headers.insert("grpc-message", message);
        }
        extend(headers, refused.headers());
        return response;
    }
    let (content_type, body) = if wants_text(request) {
        (
            "text/plain; charset=utf-8",
            format!("{}\n", reason.message()),
        )
    } else {
        let mut body = serde_json::json!({
            "error": reason.message(),
            "retry_after_ms": u64::try_from(refused.retry_after().as_millis()).unwrap_or(u64::MAX),
        });
        if let Some(limit) = refused.limit() {
            body["limit"] = serde_json::Value::String(limit.to_string());
        }
        ("application/json", body.to_string())
    };
    let mut response = Response::new(body);
    *response.status_mut() = reason.status();
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    extend(headers, refused.headers());
    response
}

/// Adds the rate-limit headers of `evaluation` to an inner service's response. A `429` of
/// the service's own keeps the rate-limit headers it set (a handler answering a lockout
/// with [`headers_for`](crate::headers_for) knows which limit it hit); any other response
/// gets the layer's.
pub(crate) fn add_rate_limit_headers<B>(
    response: &mut Response<B>,
    evaluation: &Evaluation,
    style: HeaderStyle,
) {
    if response.status() == StatusCode::TOO_MANY_REQUESTS {
        add_missing(response.headers_mut(), evaluation.headers(style));
    } else {
        evaluation.insert_headers(style, response.headers_mut());
    }
}

/// Adds the headers of `from` that `headers` does not have.
fn add_missing(headers: &mut HeaderMap, from: HeaderMap) {
    for (name, value) in from {
        if let Some(name) = name {
            if !headers.contains_key(&name) {
                headers.insert(name, value);
            }
        }
    }
}

/// Moves `from` into `headers`, replacing values of the same name.
fn extend(headers: &mut HeaderMap, from: HeaderMap) {
    for (name, value) in from {
        if let Some(name) = name {
            headers.insert(name, value);
        }
    }
}

/// A response body the layer can write its own answers in. Implemented for axum's body
/// (feature `axum`) and tonic's (feature `tonic`), both on by default, `String` and
/// `Full<Bytes>`; implement it for your own body type to use the layer with it.
pub trait RefusalBody: Sized {
    /// A body holding `text` (empty for gRPC answers).
    fn from_text(text: String) -> Self;
}

#[cfg(feature = "axum")]
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
    use http::header::RETRY_AFTER;

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
            RefusalReason::Busy,
            &parts("text/plain"),
            None,
            HeaderStyle::default(),
            None,
        );
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[RETRY_AFTER], "1");
        assert_eq!(r.body(), "too many requests in flight; try again shortly\n");
    }
}
