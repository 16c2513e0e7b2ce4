//! What a limit counts by: the parts of a request that become its key (client IP, a
//! header, the path or route, the user, a [`KeyExtractor`] of your own, one global key, or
//! several at once). The first step of the layer's decision path after a policy matched: a
//! part the request lacks (a header, a user) means the policy does not apply to it; a part
//! the server failed to provide (the peer address) is an error, and the request is refused.

use crate::path::normalise_path;
use std::fmt;
use std::sync::Arc;

use http::request::Parts;
use http::HeaderName;

use crate::client_ip::ClientIp;
use crate::extractor::{KeyError, KeyExtractor, KeyParts};

/// A function from a request to its user (or any other key of your own); `None` when the
/// request has none (an anonymous request is then not limited by that policy).
pub type UserFn = Arc<dyn Fn(&Parts) -> Option<String> + Send + Sync>;

/// How a policy keys requests. Values are escaped and bounded when they become a store key
/// (see `weir_names::descriptor_key`), so a client cannot collide with another key or
/// send an unbounded one.
///
/// ```
/// use weir_tower::{ClientIp, KeyBy};
///
/// let per_ip = KeyBy::peer_ip();
/// let per_ip_behind_lb = KeyBy::client_ip(ClientIp::new().trust("10.0.0.0/8".parse()?));
/// let per_api_key = KeyBy::header("x-api-key")?;
/// let per_user_and_route = KeyBy::all([KeyBy::user(|parts| {
///     parts.headers.get("x-user").and_then(|v| v.to_str().ok()).map(str::to_owned)
/// }), KeyBy::route()]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum KeyBy {
    /// The client address: the peer, or behind trusted proxies the forwarded client.
    ClientIp(ClientIp),
    /// A request header's value; a request without it is not limited by the policy.
    Header(HeaderName),
    /// The request path (without the query) as backends resolve it
    /// ([`normalise_path`](crate::normalise_path)): one key however it is spelt.
    Path,
    /// The route pattern (axum's `MatchedPath`, e.g. `/users/{id}`; feature `axum`), else
    /// the path.
    Route,
    /// The user, as a function of the request finds it.
    User(UserFn),
    /// A [`KeyExtractor`] of your own.
    Custom(Arc<dyn KeyExtractor>),
    /// One key for every request: a global limit.
    Global,
    /// All of these at once (each must be present).
    All(Vec<KeyBy>),
}

/// A header name that is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{0}' is not a valid HTTP header name")]
pub struct HeaderNameError(pub String);

impl KeyBy {
    /// The TCP peer's address (IPv6 grouped by /64); forwarding headers are ignored.
    pub fn peer_ip() -> Self {
        Self::ClientIp(ClientIp::new())
    }

    /// The client address as `client_ip` resolves it behind trusted proxies.
    pub fn client_ip(client_ip: ClientIp) -> Self {
        Self::ClientIp(client_ip)
    }

    /// The value of header `name`.
    pub fn header(name: &str) -> Result<Self, HeaderNameError> {
        HeaderName::try_from(name)
            .map(Self::Header)
            .map_err(|_| HeaderNameError(name.to_string()))
    }

    /// The request path, normalised (`//a/./b` and `/a/b` are one key).
    pub fn path() -> Self {
        Self::Path
    }

    /// The matched route, else the path.
    pub fn route() -> Self {
        Self::Route
    }

    /// The user `find` returns for a request (e.g. from a session or a verified token).
    pub fn user(find: impl Fn(&Parts) -> Option<String> + Send + Sync + 'static) -> Self {
        Self::User(Arc::new(find))
    }

    /// The key `extractor` builds (see [`KeyExtractor`]).
    pub fn custom(extractor: impl KeyExtractor) -> Self {
        Self::Custom(Arc::new(extractor))
    }

    /// One key for all requests: a global limit, every client sharing one budget. Say so
    /// explicitly; a policy without a key does not compile.
    pub fn global() -> Self {
        Self::Global
    }

    /// Several parts at once, e.g. user and route.
    pub fn all(parts: impl IntoIterator<Item = KeyBy>) -> Self {
        Self::All(parts.into_iter().collect())
    }

    /// Whether the key needs the request's TCP peer (the client IP). Without it (a server
    /// that does not record the peer) such a key cannot be built, and the layer refuses the
    /// request rather than let it through unlimited.
    pub fn needs_peer(&self) -> bool {
        match self {
            Self::ClientIp(_) => true,
            Self::All(list) => list.iter().any(KeyBy::needs_peer),
            _ => false,
        }
    }

    /// The `(name, value)` entries of a request's key, or `None` when a part is missing
    /// (or cannot be built: see [`KeyExtractor::extract`] for the difference).
    pub fn entries(&self, parts: &Parts) -> Option<Vec<(String, String)>> {
        self.extract(parts)
            .ok()
            .flatten()
            .map(KeyParts::into_entries)
    }

    /// Appends the request's entries to `out`: `Ok(false)` when a part is missing.
    fn push_entries(
        &self,
        parts: &Parts,
        out: &mut Vec<(String, String)>,
    ) -> Result<bool, KeyError> {
        let entry = match self {
            Self::ClientIp(client_ip) => Some(
                client_ip
                    .of(parts)
                    .map(|ip| ("ip".to_string(), ip.to_string()))
                    .ok_or(KeyError::NoPeerAddress)?,
            ),
            Self::Header(name) => parts
                .headers
                .get(name)
                .map(|v| (name.as_str().to_string(), lossy(v.as_bytes()))),
            Self::Path => Some((
                "path".to_string(),
                normalise_path(parts.uri.path()).into_owned(),
            )),
            Self::Route => Some(("route".to_string(), route(parts))),
            Self::User(find) => find(parts).map(|user| ("user".to_string(), user)),
            Self::Custom(extractor) => {
                return Ok(match extractor.extract(parts)? {
                    Some(key) => {
                        out.extend(key.into_entries());
                        true
                    }
                    None => false,
                })
            }
            Self::Global => Some(("global".to_string(), "all".to_string())),
            Self::All(list) => {
                for part in list {
                    if !part.push_entries(parts, out)? {
                        return Ok(false);
                    }
                }
                return Ok(true);
            }
        };
        match entry {
            Some(entry) => {
                out.push(entry);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}

impl KeyExtractor for KeyBy {
    /// A missing header or user is `Ok(None)` (the policy does not apply); a client-IP key
    /// on a server that did not record the peer is [`KeyError::NoPeerAddress`].
    fn extract(&self, request: &Parts) -> Result<Option<KeyParts>, KeyError> {
        let mut out = Vec::with_capacity(1);
        Ok(self
            .push_entries(request, &mut out)?
            .then(|| KeyParts::from(out)))
    }
}

/// The route pattern axum matched, else the normalised path.
#[cfg(feature = "axum")]
fn route(parts: &Parts) -> String {
    parts
        .extensions
        .get::<axum::extract::MatchedPath>()
        .map_or_else(
            || normalise_path(parts.uri.path()).into_owned(),
            |m| m.as_str().to_string(),
        )
}

/// Without axum there is no matched route: the normalised path.
#[cfg(not(feature = "axum"))]
fn route(parts: &Parts) -> String {
    normalise_path(parts.uri.path()).into_owned()
}

/// A header value as text; bytes that are not UTF-8 are replaced, never dropped silently
/// into another client's key (escaping happens when the key is built).
fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

impl fmt::Debug for KeyBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ClientIp(c) => f.debug_tuple("ClientIp").field(c).finish(),
            Self::Header(h) => f.debug_tuple("Header").field(h).finish(),
            Self::Path => f.write_str("Path"),
            Self::Route => f.write_str("Route"),
            Self::User(_) => f.write_str("User(..)"),
            Self::Custom(_) => f.write_str("Custom(..)"),
            Self::Global => f.write_str("Global"),
            Self::All(list) => f.debug_tuple("All").field(list).finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    fn parts(uri: &str, headers: &[(&str, &str)], peer: Option<&str>) -> Parts {
        let mut b = http::Request::builder().uri(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let (mut parts, ()) = b.body(()).unwrap().into_parts();
        if let Some(peer) = peer {
            parts.extensions.insert(peer.parse::<SocketAddr>().unwrap());
        }
        parts
    }

    fn pair(a: &str, b: &str) -> (String, String) {
        (a.to_string(), b.to_string())
    }

    #[test]
    fn each_extractor_finds_its_part() {
        let p = parts(
            "/users/7?x=1",
            &[("x-api-key", "k1"), ("x-user", "ann")],
            Some("192.0.2.1:5555"),
        );
        assert_eq!(
            KeyBy::peer_ip().entries(&p),
            Some(vec![pair("ip", "192.0.2.1")])
        );
        assert_eq!(
            KeyBy::header("X-Api-Key").unwrap().entries(&p),
            Some(vec![pair("x-api-key", "k1")])
        );
        assert_eq!(
            KeyBy::path().entries(&p),
            Some(vec![pair("path", "/users/7")])
        );
        assert_eq!(
            KeyBy::route().entries(&p),
            Some(vec![pair("route", "/users/7")])
        );
        assert_eq!(
            KeyBy::global().entries(&p),
            Some(vec![pair("global", "all")])
        );
        let user = KeyBy::user(|p| {
            p.headers
                .get("x-user")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        });
        assert_eq!(
            KeyBy::all([user, KeyBy::path()]).entries(&p),
            Some(vec![pair("user", "ann"), pair("path", "/users/7")])
        );
    }

    /// A custom extractor in a combination: its parts join the others'; its "no key" and
    /// its error mean what they mean alone.
    #[test]
    fn a_custom_extractor_combines_like_the_built_in_ones() {
        struct Tenant;
        impl KeyExtractor for Tenant {
            fn extract(&self, request: &Parts) -> Result<Option<KeyParts>, KeyError> {
                match request.headers.get("x-tenant").map(|v| v.to_str()) {
                    None => Ok(None),
                    Some(Ok(t)) => Ok(Some(KeyParts::new("tenant", t))),
                    Some(Err(_)) => Err(KeyError::new("x-tenant is not text")),
                }
            }
        }
        let key = KeyBy::all([KeyBy::custom(Tenant), KeyBy::path()]);
        let p = parts("/a", &[("x-tenant", "acme")], None);
        assert_eq!(
            key.entries(&p),
            Some(vec![pair("tenant", "acme"), pair("path", "/a")])
        );
        assert_eq!(key.extract(&parts("/a", &[], None)), Ok(None));
        let mut bad = parts("/a", &[], None);
        bad.headers
            .insert("x-tenant", http::HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(
            key.extract(&bad).unwrap_err().to_string(),
            "x-tenant is not text"
        );
        assert!(!key.needs_peer());
    }

    #[test]
    fn a_missing_part_means_no_key() {
        let p = parts("/", &[], None);
        assert_eq!(KeyBy::peer_ip().entries(&p), None);
        assert_eq!(KeyBy::header("x-api-key").unwrap().entries(&p), None);
        assert_eq!(
            KeyBy::all([KeyBy::global(), KeyBy::header("x-a").unwrap()]).entries(&p),
            None
        );
        assert_eq!(
            KeyBy::all([KeyBy::header("x-a").unwrap(), KeyBy::peer_ip()]).extract(&p),
            Ok(None),
            "a missing part first: no key, whatever follows"
        );
        assert_eq!(
            KeyBy::all([KeyBy::global(), KeyBy::peer_ip()]).extract(&p),
            Err(KeyError::NoPeerAddress),
            "no peer is an error, not a request without a key"
        );
        assert_eq!(
            KeyBy::header("bad header").unwrap_err().to_string(),
            "'bad header' is not a valid HTTP header name"
        );
    }
}
