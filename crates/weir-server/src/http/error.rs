//! [`ApiError`]: how the HTTP API says no. A status code and a JSON body
//! `{"error": "<what was wrong>"}`; never a panic, never an empty 500.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

use crate::decide::DecideError;

/// An HTTP error answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ApiError {
    pub(crate) status: StatusCode,
    pub(crate) message: String,
}

impl ApiError {
    pub(crate) fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({ "error": self.message });
        (self.status, Json(body)).into_response()
    }
}
