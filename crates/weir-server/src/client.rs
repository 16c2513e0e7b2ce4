//! A tiny HTTP/1.1 client for talking to a running server: `weir decide` uses it, and so do
//! the tests. One connection per call, a deadline on the whole exchange, no redirects, no
//! TLS (the server speaks plain HTTP on a private address).

use std::time::Duration;

use axum::body::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper_util::rt::TokioIo;

/// What the server answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpAnswer {
    /// The status code.
    pub status: u16,
    /// The headers, names in lower case.
    pub headers: Vec<(String, String)>,
    /// The body as text (lossy UTF-8).
    pub body: String,
}

impl HttpAnswer {
    /// The first header named `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a call failed (not an HTTP error status: those are answers).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// Could not connect.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP exchange failed.
    #[error("http: {0}")]
    Http(String),
    /// No answer within the deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Sends `method path` to `addr` (`host:port`) with an optional JSON body and bearer token.
///
/// ```no_run
/// # async fn demo() -> Result<(), weir_server::ClientError> {
/// use std::time::Duration;
/// let body = r#"{"domain":"api","descriptors":[{"entries":[{"key":"user","value":"alice"}]}]}"#;
/// let answer = weir_server::client::send(
///     "127.0.0.1:8080", "POST", "/v1/check", Some(body), None, Duration::from_secs(5),
/// ).await?;
/// println!("{} {}", answer.status, answer.body);
/// # Ok(()) }
/// ```
pub async fn send(
    addr: &str,
    method: &str,
    path: &str,
    json_body: Option<&str>,
    bearer: Option<&str>,
    deadline: Duration,
) -> Result<HttpAnswer, ClientError> {
    tokio::time::timeout(deadline, exchange(addr, method, path, json_body, bearer))
        .await
        .map_err(|_| ClientError::Timeout(deadline))?
}

async fn exchange(
    addr: &str,
    method: &str,
    path: &str,
    json_body: Option<&str>,
    bearer: Option<&str>,
) -> Result<HttpAnswer, ClientError> {
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|source| ClientError::Connect {
            addr: addr.to_string(),
            source,
        })?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| ClientError::Http(e.to_string()))?;
    let driver = tokio::spawn(connection);
    let mut request = Request::builder()
        .method(method)
        .uri(path)
        .header(hyper::header::HOST, addr);
    if json_body.is_some() {
        request = request.header(hyper::header::CONTENT_TYPE, "application/json");
    }
    if let Some(token) = bearer {
        request = request.header(hyper::header::AUTHORIZATION, format!("Bearer {token}"));
    }
    let body = Full::new(Bytes::from(json_body.unwrap_or_default().to_string()));
    let request = request
        .body(body)
        .map_err(|e| ClientError::Http(e.to_string()))?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| ClientError::Http(e.to_string()))?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| ClientError::Http(e.to_string()))?
        .to_bytes();
    driver.abort();
    Ok(HttpAnswer {
        status,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}
