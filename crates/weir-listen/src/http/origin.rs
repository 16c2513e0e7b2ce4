//! Cross-site browser requests: refused before any request that can change state (every
//! method but `GET`, `HEAD` and `OPTIONS`: the decision endpoints, which spend budgets, the
//! leases and the admin API's `POST`s) reaches a handler. Checked by the router's `bounded`
//! middleware and by the listener's direct routes (`direct.rs`), before the body is read.
//!
//! A web page on any origin can make its visitor's browser send a "simple" `POST`
//! (`text/plain`, a form) to a server on the visitor's network without asking; the page
//! cannot read the answer, but the budget is spent (issue 26: seven no-cors `text/plain`
//! POSTs to `/json` locked an account out). Browsers say where such a request comes from;
//! non-browser clients (Envoy, curl, the SDKs) send neither header, so nothing changes for
//! them. Refused (`403`, JSON):
//!
//! - `Sec-Fetch-Site` other than `same-origin` or `none` (`none`: the user's own action,
//!   such as a bookmark). `same-site` is refused too: a sibling host (another port, another
//!   subdomain) is another application, and the server's own dashboard is same-origin;
//! - an `Origin` that is not this server's own: its host and port against the request's
//!   `Host` (a missing port is the Origin's scheme's default: behind a proxy that ends
//!   TLS, the browser's scheme is not the listener's), so `Origin: null` (a sandboxed
//!   frame, a redirect) and a missing `Host` are refused too.
//!
//! Not here: DNS rebinding (a page whose own name resolves to this server is same-origin
//! to it); the admin API's bearer token is what stands against that.

use axum::http::header::{HOST, ORIGIN};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

use super::error::ApiError;

/// `Sec-Fetch-Site` (not among `http`'s constants).
const SEC_FETCH_SITE: HeaderName = HeaderName::from_static("sec-fetch-site");

/// The `403` for a cross-site browser request that would change state; `None` for any
/// other request (a read, a non-browser client, the server's own pages).
pub fn refuse_cross_site(method: &Method, headers: &HeaderMap) -> Option<ApiError> {
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return None;
    }
    if let Some(site) = headers.get(SEC_FETCH_SITE) {
        let site = site.as_bytes();
        if !(site.eq_ignore_ascii_case(b"same-origin") || site.eq_ignore_ascii_case(b"none")) {
            return Some(refused(format!(
                "Sec-Fetch-Site is {}",
                shown(headers.get(SEC_FETCH_SITE))
            )));
        }
    }
    let origin = headers.get(ORIGIN)?;
    let host = headers.get(HOST);
    if same_origin(origin, host) {
        return None;
    }
    Some(refused(format!(
        "Origin {} is not this server's (Host {})",
        shown(Some(origin)),
        shown(host)
    )))
}

fn refused(why: String) -> ApiError {
    ApiError::new(
        StatusCode::FORBIDDEN,
        format!(
            "cross-site browser requests cannot change state here: {why}; call this API from \
             a server (Envoy, curl and the SDKs send no Origin or Sec-Fetch-Site header)"
        ),
    )
}

/// A header value for a message: its text, or a placeholder.
fn shown(value: Option<&HeaderValue>) -> String {
    match value.map(HeaderValue::to_str) {
        None => "(none)".to_string(),
        Some(Ok(text)) => format!("{text:?}"),
        Some(Err(_)) => "(not text)".to_string(),
    }
}

/// Whether `origin` (`scheme://host[:port]`) names the server the request was sent to
/// (`host`, the `Host` header), ports filled in with the scheme's default.
fn same_origin(origin: &HeaderValue, host: Option<&HeaderValue>) -> bool {
    let (Ok(origin), Some(Ok(host))) = (origin.to_str(), host.map(HeaderValue::to_str)) else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    let default_port = if scheme.eq_ignore_ascii_case("http") {
        80
    } else if scheme.eq_ignore_ascii_case("https") {
        443
    } else {
        return false;
    };
    if authority.is_empty() || authority.contains(['/', '?', '#', '@']) || host.is_empty() {
        return false;
    }
    with_port(authority, default_port).eq_ignore_ascii_case(&with_port(host, default_port))
}

/// `authority` with its port, `default_port` when it has none (`[::1]` included).
fn with_port(authority: &str, default_port: u16) -> String {
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    if authority
        .get(host_end..)
        .is_some_and(|port| port.contains(':'))
    {
        authority.to_string()
    } else {
        format!("{authority}:{default_port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_static(value));
        }
        map
    }

    fn refused(pairs: &[(&'static str, &'static str)]) -> bool {
        refuse_cross_site(&Method::POST, &headers(pairs)).is_some()
    }

    #[test]
    fn what_chromium_sends_cross_site_is_refused() {
        assert!(refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://evil.example"),
            ("sec-fetch-site", "cross-site"),
            ("sec-fetch-mode", "no-cors"),
        ]));
        // Either header alone suffices (older browsers send only Origin).
        assert!(refused(&[
            ("host", "h:1"),
            ("sec-fetch-site", "cross-site")
        ]));
        assert!(refused(&[("host", "h:1"), ("sec-fetch-site", "same-site")]));
        assert!(refused(&[
            ("host", "h:1"),
            ("sec-fetch-site", "something-new")
        ]));
        assert!(refused(&[
            ("host", "h:1"),
            ("origin", "http://evil.example")
        ]));
        assert!(refused(&[("host", "h:1"), ("origin", "null")]));
        assert!(
            refused(&[("origin", "http://h:1")]),
            "no Host to compare with"
        );
        // Another port of the same host is another origin.
        assert!(refused(&[("host", "h:8080"), ("origin", "http://h:8081")]));
        assert!(refused(&[("host", "h"), ("origin", "http://h:8080")]));
        assert!(refused(&[("host", "h:443"), ("origin", "http://h")]));
        assert!(refused(&[("host", "h:1"), ("origin", "http://h:1/path")]));
    }

    #[test]
    fn non_browser_clients_reads_and_the_servers_own_pages_pass() {
        assert!(!refused(&[("host", "127.0.0.1:8080")]), "curl, Envoy, SDKs");
        assert!(!refused(&[]));
        assert!(!refused(&[
            ("host", "127.0.0.1:8080"),
            ("origin", "http://127.0.0.1:8080"),
            ("sec-fetch-site", "same-origin"),
        ]));
        assert!(!refused(&[
            ("host", "Weir.Example"),
            ("origin", "http://weir.example:80")
        ]));
        assert!(!refused(&[
            ("host", "weir.example:443"),
            ("origin", "https://weir.example")
        ]));
        assert!(!refused(&[
            ("host", "[::1]:8080"),
            ("origin", "http://[::1]:8080")
        ]));
        // Behind a proxy that ends TLS, the browser's scheme is not the listener's: a Host
        // without a port takes the Origin's default.
        assert!(!refused(&[("host", "h"), ("origin", "https://h")]));
        assert!(!refused(&[("host", "h"), ("sec-fetch-site", "none")]));
        let cross = headers(&[
            ("origin", "http://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ]);
        assert!(
            refuse_cross_site(&Method::GET, &cross).is_none(),
            "reads change nothing"
        );
    }
}
