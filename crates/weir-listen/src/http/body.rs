//! Reading a request body: [`RawBody`] takes its bytes under the router's size limit
//! (`413` in the API's JSON shape past it) and marks the request's [`BodyRead`] (so the
//! router's timeout tells a slow body, `408`, from a slow answer, `503`), [`parse`] reads them into a type with a 400 that
//! names the field at fault (`invalid JSON at descriptors[0].entries[1].value: invalid
//! type: integer, expected a string`).
//!
//! A well-formed body is read once, by plain `serde_json` (no path tracking: this is on
//! every decision's path); only a body that fails is read again to say where.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;

use super::error::ApiError;
use crate::app::App;

/// One descriptor entry of a request body, `{"key": …, "value": …}`, its strings borrowed
/// from the body where JSON needs no unescaping (the decision API's and the admin API's).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EntryBody<'a> {
    /// The entry's key.
    #[serde(borrow)]
    pub key: Cow<'a, str>,
    /// The entry's value.
    #[serde(borrow)]
    pub value: Cow<'a, str>,
}

/// A request's whole body. axum's own `Bytes` extractor answers a body past the limit
/// with a plain-text `413`; this one answers every refusal as an [`ApiError`].
pub struct RawBody(pub Bytes);

/// Whether a request's body has arrived whole: put on a request that has a body by the
/// router's timeout, marked by [`RawBody`] once it has read it.
#[derive(Debug, Clone, Default)]
pub struct BodyRead(Arc<AtomicBool>);

impl BodyRead {
    /// Whether the body was read to its end.
    pub fn done(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// Any router whose state holds an [`App`] (`weir serve`'s decision routes too).
impl<S> FromRequest<S> for RawBody
where
    S: Send + Sync,
    App: FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let read = request.extensions().get::<BodyRead>().cloned();
        let app = App::from_ref(state);
        match Bytes::from_request(request, state).await {
            Ok(bytes) => {
                if let Some(read) = read {
                    read.0.store(true, Ordering::Release);
                }
                Ok(RawBody(bytes))
            }
            Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                Err(too_large(app.settings().max_body_bytes))
            }
            Err(rejection) => Err(ApiError::new(rejection.status(), rejection.body_text())),
        }
    }
}

/// The `413` for a body past `max_body_bytes`.
pub fn too_large(max_body_bytes: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        format!("the request body is larger than the limit of {max_body_bytes} bytes"),
    )
}

/// Reads a whole body of at most `max_body_bytes` (the listener's direct route; the
/// router's routes take [`RawBody`]): a `413` past it, a `400` if the client breaks off
/// or breaks the framing.
pub async fn read_limited<B>(body: B, max_body_bytes: usize) -> Result<Bytes, ApiError>
where
    B: hyper::body::Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    use http_body_util::BodyExt as _;
    // A body of one frame (the common one) is that frame's bytes, kept as they are; the
    // frames of a longer one are copied into one buffer. Trailers are left out.
    let mut body = std::pin::pin!(body);
    let (mut first, mut joined): (Option<Bytes>, Option<Vec<u8>>) = (None, None);
    let mut length = 0_usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|error| {
            let error: Box<dyn std::error::Error + Send + Sync> = error.into();
            ApiError::bad_request(format!("Failed to buffer the request body: {error}"))
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        length = length.saturating_add(data.len());
        if length > max_body_bytes {
            return Err(too_large(max_body_bytes));
        }
        match (&mut joined, first.take()) {
            (Some(joined), _) => joined.extend_from_slice(&data),
            (None, None) => first = Some(data),
            (None, Some(before)) => {
                let mut both = Vec::with_capacity(length);
                both.extend_from_slice(&before);
                both.extend_from_slice(&data);
                joined = Some(both);
            }
        }
    }
    Ok(match (joined, first) {
        (Some(joined), _) => Bytes::from(joined),
        (None, first) => first.unwrap_or_default(),
    })
}

/// Refuses a body that does not say it is JSON (`415`). A browser page may send a
/// cross-site POST without asking first only as `text/plain`, a form, or with no type at
/// all; requiring `application/json` (or a `+json` type) on the endpoints that change
/// state keeps any web page a user visits on the internal network from spending a
/// client's budget or locking accounts out.
pub fn require_json(headers: &HeaderMap) -> Result<(), ApiError> {
    require_json_type(headers.get(header::CONTENT_TYPE))
}

/// [`require_json`] on the `Content-Type` header's value, found beforehand (the direct
/// routes read the head in one pass, [`HeadFacts`](super::HeadFacts)).
pub fn require_json_type(content_type: Option<&HeaderValue>) -> Result<(), ApiError> {
    // What nearly every client sends, compared first.
    if content_type.is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"application/json")) {
        return Ok(());
    }
    let media = content_type
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(str::trim);
    // Compared in place, any case (no lowercase copy on the decision path).
    let json = media.is_some_and(|m| {
        m.eq_ignore_ascii_case("application/json")
            || (m
                .get(..12)
                .is_some_and(|t| t.eq_ignore_ascii_case("application/"))
                && m.len() > 17
                && m.get(m.len() - 5..)
                    .is_some_and(|s| s.eq_ignore_ascii_case("+json")))
    });
    if json {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "the body must be sent as Content-Type: application/json (got {})",
            media.map_or_else(|| "no Content-Type".to_string(), str::to_ascii_lowercase)
        ),
    ))
}

/// Whether the request says its body is JSON ([`require_json`]), read from the request's
/// head in place: the handlers that need it take this instead of a copy of every header.
/// It never rejects; the handler answers the `415` where it always did (after the body is
/// read, so a body over the limit is still a `413` first).
pub struct JsonType(pub Result<(), ApiError>);

impl<S: Send + Sync> FromRequestParts<S> for JsonType {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(JsonType(require_json(&parts.headers)))
    }
}

/// Parses `bytes` as `T`, or says where and why not.
pub fn parse<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    match serde_json::from_slice(bytes) {
        Ok(value) => Ok(value),
        Err(_) => explain(bytes),
    }
}

/// Parses `bytes` again, tracking the path, for the error message (or, should the two
/// parsers ever disagree, the value).
fn explain<'a, T: Deserialize<'a>>(bytes: &'a [u8]) -> Result<T, ApiError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path.is_empty() || path == "." || path == "?" {
            ApiError::bad_request(format!("invalid JSON: {inner}"))
        } else {
            ApiError::bad_request(format!("invalid JSON at {path}: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("invalid JSON: {e}")))?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn typed(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Ok(value) = value.parse() {
            headers.insert(header::CONTENT_TYPE, value);
        }
        headers
    }

    #[test]
    fn json_types_in_any_case_pass_and_others_are_415s_that_say_what_came() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            " application/json ;x=y",
            "application/vnd.api+json",
            "APPLICATION/PROBLEM+JSON",
        ] {
            assert!(require_json(&typed(ok)).is_ok(), "{ok}");
        }
        for refused in [
            "text/plain",
            "application/+json",
            "application/jsonx",
            "json",
            "",
        ] {
            let error = require_json(&typed(refused)).unwrap_err();
            assert_eq!(
                error.status,
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "{refused}"
            );
        }
        let error = require_json(&typed("Text/Plain")).unwrap_err();
        assert!(
            error.message.contains("(got text/plain)"),
            "{}",
            error.message
        );
        let error = require_json(&HeaderMap::new()).unwrap_err();
        assert!(
            error.message.contains("(got no Content-Type)"),
            "{}",
            error.message
        );
    }

    /// A body of the given frames: data, or an error in their place.
    struct Frames(std::collections::VecDeque<Result<&'static [u8], &'static str>>);

    impl hyper::body::Body for Frames {
        type Data = Bytes;
        type Error = Box<dyn std::error::Error + Send + Sync>;

        fn poll_frame(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
            std::task::Poll::Ready(self.0.pop_front().map(|frame| {
                frame
                    .map(|data| hyper::body::Frame::data(Bytes::from_static(data)))
                    .map_err(Into::into)
            }))
        }
    }

    fn read(frames: &[Result<&'static [u8], &'static str>], limit: usize) -> Result<Bytes, String> {
        let body = Frames(frames.iter().copied().collect());
        tokio::runtime::Builder::new_current_thread()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(read_limited(body, limit))
            .map_err(|e| format!("{} {}", e.status.as_u16(), e.message))
    }

    #[test]
    fn a_body_is_read_whole_up_to_its_limit_in_one_frame_or_many() {
        assert_eq!(read(&[], 8).as_deref(), Ok(&b""[..]));
        assert_eq!(read(&[Ok(b"{}")], 8).as_deref(), Ok(&b"{}"[..]));
        assert_eq!(
            read(&[Ok(b"ab"), Ok(b""), Ok(b"cd"), Ok(b"ef")], 6).as_deref(),
            Ok(&b"abcdef"[..])
        );
        let over = "413 the request body is larger than the limit of 5 bytes".to_string();
        assert_eq!(read(&[Ok(b"abcdef")], 5), Err(over.clone()));
        assert_eq!(read(&[Ok(b"abc"), Ok(b"def")], 5), Err(over));
        assert_eq!(
            read(&[Ok(b"abc"), Err("connection reset")], 5),
            Err("400 Failed to buffer the request body: connection reset".to_string())
        );
    }
}
