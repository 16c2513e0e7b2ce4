//! An upstream: where the proxy forwards requests (`http://host:port`). Parsed and checked
//! once at start-up, so a typo is an error that names the flag's value, not a 502 later.

use std::fmt;
use std::str::FromStr;

use http::uri::{Authority, Scheme};
use http::Uri;

/// An HTTP upstream, `http://host:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upstream {
    scheme: Scheme,
    authority: Authority,
}

/// An upstream URL that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("upstream '{url}': {reason}")]
pub struct UpstreamError {
    url: String,
    reason: &'static str,
}

impl Upstream {
    /// Where it listens (`host[:port]`).
    pub(crate) fn authority(&self) -> &Authority {
        &self.authority
    }
}

impl FromStr for Upstream {
    type Err = UpstreamError;

    fn from_str(url: &str) -> Result<Self, Self::Err> {
        let error = |reason| UpstreamError {
            url: url.to_string(),
            reason,
        };
        let uri: Uri = url
            .parse()
            .map_err(|_| error("not a URL (like http://127.0.0.1:9000)"))?;
        let scheme = uri
            .scheme()
            .cloned()
            .ok_or_else(|| error("no scheme: write http://…"))?;
        if scheme != Scheme::HTTP {
            return Err(error("only http:// upstreams are supported (terminate TLS in front of the backend's host, or on the backend)"));
        }
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| error("no host: write http://host:port"))?;
        if authority.as_str().contains('@') {
            return Err(UpstreamError {
                // Never echo the credentials back.
                url: format!("http://…@{}", authority.host()),
                reason: "credentials in the URL are not supported (they would show in logs)",
            });
        }
        if uri.path() != "/" && !uri.path().is_empty() {
            return Err(error(
                "a path is not supported: requests keep their own path",
            ));
        }
        if uri.query().is_some() {
            return Err(error("a query is not supported"));
        }
        Ok(Self { scheme, authority })
    }
}

impl fmt::Display for Upstream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.authority)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_parse_or_say_why_not() {
        let up: Upstream = "http://127.0.0.1:9000".parse().unwrap();
        assert_eq!(up.to_string(), "http://127.0.0.1:9000");
        assert_eq!(up.authority().as_str(), "127.0.0.1:9000");
        let e = "https://x".parse::<Upstream>().unwrap_err().to_string();
        assert!(e.starts_with("upstream 'https://x': only http://"), "{e}");
        assert!("127.0.0.1:9000".parse::<Upstream>().is_err());
        let e = "http://admin:hunter2@h:1"
            .parse::<Upstream>()
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "upstream 'http://…@h': credentials in the URL are not supported (they would show in logs)"
        );
        assert!(!e.contains("hunter2"));
        assert_eq!(
            "http://h:1/base"
                .parse::<Upstream>()
                .unwrap_err()
                .to_string(),
            "upstream 'http://h:1/base': a path is not supported: requests keep their own path"
        );
    }
}
