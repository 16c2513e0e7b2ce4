//! The proxy's own answers (never the upstream's): a status and a one-line JSON body that
//! says why, e.g. `{"error":"upstream http://10.0.0.5:8080 is unreachable"}`. Used by
//! [`Forward`](crate::Forward) (502, 504, 400, 408) and by the screen in front of the
//! limits (400, 501).

use http::header::{HeaderValue, CONNECTION, CONTENT_TYPE};
use http::{Response, StatusCode};
use http_body_util::Full;
use hyper::body::Bytes;

use crate::answer::ProxyBody;

/// `status` with `{"error": message}`.
pub(crate) fn error(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let body = serde_json::json!({ "error": message }).to_string();
    let mut response = Response::new(ProxyBody::own(Full::new(Bytes::from(body))));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// [`error`], and the client's connection is closed after it: what is left of the
/// request on it (an unread or broken body) cannot be trusted to frame the next one.
pub(crate) fn error_and_close(status: StatusCode, message: &str) -> Response<ProxyBody> {
    let mut response = error(status, message);
    response
        .headers_mut()
        .insert(CONNECTION, HeaderValue::from_static("close"));
    response
}
