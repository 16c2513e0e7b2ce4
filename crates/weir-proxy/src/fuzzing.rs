//! Doc-hidden entry point for fuzzing the proxy's request-head handling (the cargo-fuzz
//! target `fuzz/fuzz_targets/proxy_head.rs` and the stable smoke run in
//! `tests/fuzz_smoke.rs`). Not an API.
//!
//! It reads arbitrary bytes as an HTTP/1 request head (as hyper would: `httparse`), then
//! runs what the proxy does with a head before any limit: the refusals (`screen`: Host,
//! CONNECT, ambiguous paths), whether it is an upgrade to tunnel (`tunnel::upgrade_of`),
//! the path descriptor (under the default reading, normalised and bounded) and the client
//! IP behind a trusted balancer (forwarding headers read right to left).

use std::net::SocketAddr;

use axum::body::Body;
use http::{Method, Request, Version};
use weir_tower::{ClientIp, KeyBy, PathMatch};

use crate::screen::screen;

/// What the proxy made of a head that parsed.
#[derive(Debug)]
pub struct Head {
    /// Refused before any limit (400, or 501 for CONNECT).
    pub refused: bool,
    /// A protocol upgrade the proxy would tunnel (WebSocket).
    pub upgrade: bool,
    /// The path descriptor's value (normalised, bounded); `None` when the path is refused
    /// (and then so is the request).
    pub path: Option<String>,
    /// The client IP key entries, when the forwarding headers gave one.
    pub client: Option<Vec<(String, String)>>,
}

/// Parses `bytes` as a request head and runs the proxy's head handling on it. `None` when
/// hyper would not have parsed it either.
pub fn request_head(bytes: &[u8]) -> Option<Head> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Request::new(&mut headers);
    if !parsed.parse(bytes).ok()?.is_complete() {
        return None;
    }
    let mut request = Request::builder()
        .method(Method::from_bytes(parsed.method?.as_bytes()).ok()?)
        .uri(parsed.path?)
        .version(if parsed.version? == 0 {
            Version::HTTP_10
        } else {
            Version::HTTP_11
        });
    for h in parsed.headers.iter() {
        request = request.header(h.name, h.value);
    }
    let mut request = request.body(Body::empty()).ok()?;
    request
        .extensions_mut()
        .insert(SocketAddr::from(([10, 0, 0, 1], 40_000)));
    let refused = screen(&request, PathMatch::default()).is_err();
    let upgrade = crate::tunnel::upgrade_of(&request).is_some();
    let path = PathMatch::default()
        .normalise(request.uri().path())
        .ok()
        .map(|path| weir_config::bounded_value(&path).into_owned());
    let (parts, _) = request.into_parts();
    let trusted = ClientIp::new().trust("10.0.0.0/8".parse().ok()?);
    let client = KeyBy::client_ip(trusted).entries(&parts);
    Some(Head {
        refused,
        upgrade,
        path,
        client,
    })
}
