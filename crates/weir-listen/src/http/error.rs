//! [`ApiError`]: how the HTTP API says no. A status code and a JSON body
//! `{"error": "<what was wrong>"}`; never a panic, never an empty 500. axum's own refusals
//! (a body past the limit, a method a route does not take, a bad query string) are plain
//! text: the API answers them here instead (`body.rs`, [`method_not_allowed`], the admin
//! API's query). Only what hyper refuses before a request exists (a malformed request
//! line, a head past its read buffer) is not JSON.

use axum::body::{Body, Bytes};
use axum::http::header::CONTENT_TYPE;
use axum::http::{self as http, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use http_body_util::Full;

use weir_engine::DecideError;

/// An HTTP error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The status answered.
    pub status: StatusCode,
    /// What was wrong (the body's `error`).
    pub message: String,
}

impl ApiError {
    /// `status` with `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    /// A `400` with `message`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
}

/// A route that exists but does not take `method`: `405`, with the `Allow` header axum
/// adds (a fallback of every route's method router).
pub async fn method_not_allowed(method: Method) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("{method} is not allowed here (see the Allow header)"),
    )
}

impl From<DecideError> for ApiError {
    fn from(error: DecideError) -> Self {
        let status = match error {
            DecideError::Invalid(_) => StatusCode::BAD_REQUEST,
            DecideError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            DecideError::Rule { .. } => StatusCode::BAD_REQUEST,
        };
        Self::new(status, error.to_string())
    }
}

impl ApiError {
    /// The answer as a response with a plain body (what the listener's direct route
    /// sends; [`IntoResponse`] boxes the same).
    pub fn into_full(self) -> http::Response<Full<Bytes>> {
        let body = serde_json::json!({ "error": self.message }).to_string();
        let mut response = http::Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = self.status;
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        response
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        self.into_full().map(Body::new)
    }
}
