//! The screen: requests `weir proxy` refuses before any limit counts them or any upstream
//! sees them, each with the proxy's own answer saying why. A refusal costs the client no
//! budget and the backend nothing.
//!
//! - `Host` (RFC 9112 §3.2): an HTTP/1.1 request without one, with more than one, or with
//!   one that is not `host[:port]` is a `400`. A backend that reads the first of two Host
//!   headers while a cache or a router before it read the last is how requests get
//!   smuggled to another virtual host.
//! - `CONNECT` is a `501`: it asks for a tunnel to any host and port, which a reverse
//!   proxy for one backend must not open (forwarded, it reached the backend as a
//!   `CONNECT /`).
//! - A path spelling routers read differently (`%2F`, `%00`, `/a/..;/b`, …: see
//!   [`PathMatch`] for the list and why) is a `400` under `--path-match normalized`, the
//!   default; under `exact`, only control bytes are. Refused here, not guessed at: what a
//!   backend would make of `/login%2f` decides which budget it should spend, and no one
//!   reading fits every backend. The limits then key on the path's normal form, which
//!   therefore always exists.
//! - A protocol upgrade (`Upgrade: websocket`) is not refused: it is tunnelled once the
//!   limits let it go (`tunnel.rs` says which requests are upgrades and how).
//!
//! Not a parser: hyper has already framed the request (lengths, chunked encoding, header
//! syntax); this only checks what HTTP allows hyper to pass on.

use http::header::HOST;
use http::uri::Authority;
use http::{HeaderMap, Method, Request, StatusCode, Version};
use weir_tower::{PathMatch, PathRefusal};

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Refusal {
    /// HTTP/1.1 without `Host`.
    #[error("an HTTP/1.1 request needs a Host header (RFC 9112 section 3.2)")]
    NoHost,
    /// Two or more `Host` headers.
    #[error("more than one Host header (RFC 9112 section 3.2)")]
    HostTwice,
    /// A `Host` that is not `host[:port]`.
    #[error("the Host header is not a valid host[:port] (RFC 9112 section 3.2)")]
    BadHost,
    /// A `CONNECT` request.
    #[error(
        "CONNECT is not supported: weir proxy is a reverse proxy for its upstreams, not a tunnel"
    )]
    Connect,
    /// A path spelling backends read differently.
    #[error("ambiguous request path, refused: {0}")]
    Path(PathRefusal),
}

impl Refusal {
    pub(crate) fn status(self) -> StatusCode {
        match self {
            Self::NoHost | Self::HostTwice | Self::BadHost | Self::Path(_) => {
                StatusCode::BAD_REQUEST
            }
            Self::Connect => StatusCode::NOT_IMPLEMENTED,
        }
    }
}

/// The request's refusal, if it has one; `path_match` says how its path is read.
pub(crate) fn screen<B>(request: &Request<B>, path_match: PathMatch) -> Result<(), Refusal> {
    if request.method() == Method::CONNECT {
        return Err(Refusal::Connect);
    }
    check_host(request.version(), request.headers())?;
    path_match
        .normalise(request.uri().path())
        .map(drop)
        .map_err(Refusal::Path)
}

fn check_host(version: Version, headers: &HeaderMap) -> Result<(), Refusal> {
    let mut hosts = headers.get_all(HOST).iter();
    let Some(host) = hosts.next() else {
        return match version {
            Version::HTTP_09 | Version::HTTP_10 => Ok(()),
            _ => Err(Refusal::NoHost),
        };
    };
    if hosts.next().is_some() {
        return Err(Refusal::HostTwice);
    }
    if plain_host_and_port(host.as_bytes()) {
        return Ok(());
    }
    match Authority::try_from(host.as_bytes()) {
        Ok(authority) if is_host_and_port(&authority) => Ok(()),
        _ => Err(Refusal::BadHost),
    }
}

/// The common `Host`, checked without parsing it as an authority (nor copying it, as that
/// parse does): a name or IPv4 address of letters, digits, `.` and `-`, and an optional
/// port of one to five digits. Every value this accepts, the full check accepts too (a
/// test says so); anything else (an IPv6 literal, an odd byte) goes to the full check.
fn plain_host_and_port(host: &[u8]) -> bool {
    let (name, port) = match host.iter().position(|&b| b == b':') {
        Some(at) => (host.get(..at), host.get(at + 1..)),
        None => (Some(host), None),
    };
    let name_ok = name.is_some_and(|name| {
        !name.is_empty()
            && name
                .iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
    });
    let port_ok = port
        .is_none_or(|port| (1..=5).contains(&port.len()) && port.iter().all(u8::is_ascii_digit));
    name_ok && port_ok
}

/// `uri-host [":" port]`: `Authority` also takes `user@host` and any text after the colon.
fn is_host_and_port(authority: &Authority) -> bool {
    let text = authority.as_str();
    if text.contains('@') {
        return false;
    }
    match text.get(authority.host().len()..) {
        Some("") => true,
        Some(rest) => rest
            .strip_prefix(':')
            .is_some_and(|port| port.len() <= 5 && port.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(hosts: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for host in hosts {
            h.append(HOST, HeaderValue::from_static(host));
        }
        h
    }

    #[test]
    fn host_headers_are_checked_as_rfc_9112_says() {
        let ok = [
            &["a.example"][..],
            &["a.example:8080"],
            &["[2001:db8::1]:80"],
        ];
        for hosts in ok {
            assert_eq!(check_host(Version::HTTP_11, &headers(hosts)), Ok(()));
        }
        assert_eq!(check_host(Version::HTTP_10, &headers(&[])), Ok(()));
        assert_eq!(
            check_host(Version::HTTP_11, &headers(&[])),
            Err(Refusal::NoHost)
        );
        assert_eq!(
            check_host(Version::HTTP_11, &headers(&["a.example", "a.example"])),
            Err(Refusal::HostTwice)
        );
        for bad in [
            "",
            "a b",
            "u@a.example",
            "a.example/x",
            "a.example:port",
            "a:123456",
        ] {
            assert_eq!(
                check_host(Version::HTTP_11, &headers(&[bad])),
                Err(Refusal::BadHost),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ambiguous_paths_are_refused_and_exact_refuses_only_control_bytes() {
        let get = |target: &str| {
            Request::get(target)
                .header(HOST, "a.example")
                .body(())
                .unwrap()
        };
        let refused = |why| Err::<(), _>(Refusal::Path(why));
        assert_eq!(
            screen(&get("/login%2f"), PathMatch::Normalized),
            refused(PathRefusal::EncodedSeparator)
        );
        assert_eq!(
            screen(&get("/login/..;/login"), PathMatch::Normalized),
            refused(PathRefusal::ParamsOnDotSegment)
        );
        assert_eq!(screen(&get("/LOGIN;a=1/"), PathMatch::Normalized), Ok(()));
        assert_eq!(screen(&get("/login%2f"), PathMatch::Exact), Ok(()));
        assert_eq!(
            screen(&get("/login%00"), PathMatch::Exact),
            refused(PathRefusal::ControlByte)
        );
        assert_eq!(
            Refusal::Path(PathRefusal::ControlByte).status(),
            StatusCode::BAD_REQUEST
        );
    }

    /// The fast check never accepts what the full one refuses: every short value over
    /// the bytes that matter (name bytes, `:`, digits, `[`, `]`, `@`, and a few others).
    #[test]
    fn the_plain_host_check_accepts_only_what_the_full_check_accepts() {
        let alphabet = b"a9.-:[]@_%/ 0";
        let full = |host: &[u8]| {
            Authority::try_from(host).is_ok_and(|authority| is_host_and_port(&authority))
        };
        let mut checked = 0;
        for len in 1..=5usize {
            let mut digits = vec![0usize; len];
            loop {
                let host: Vec<u8> = digits.iter().map(|&d| alphabet[d]).collect();
                if plain_host_and_port(&host) {
                    assert!(full(&host), "{:?}", String::from_utf8_lossy(&host));
                    checked += 1;
                }
                // The next value, like an odometer.
                let Some(i) = digits.iter().rposition(|&d| d + 1 < alphabet.len()) else {
                    break;
                };
                digits[i] += 1;
                for d in &mut digits[i + 1..] {
                    *d = 0;
                }
            }
        }
        assert!(checked > 1000, "{checked}");
        for host in ["a.example:8080", "192.0.2.1", "localhost:1"] {
            assert!(plain_host_and_port(host.as_bytes()), "{host}");
        }
        for host in ["", ":80", "a:", "a:123456", "[::1]:80", "a@b", "a b"] {
            assert!(!plain_host_and_port(host.as_bytes()), "{host}");
        }
    }
}
