//! `--store URL`: which store the server decides on, parsed into a [`StoreSpec`] before
//! anything connects. Opening it is `store.rs`. Passwords in URLs are never printed.

use std::fmt;

/// The schemes `--store` accepts, for messages.
pub const SUPPORTED_STORES: &str =
    "memory, redis://, rediss://, redis+cluster://, redis+sentinel://, memcached://";

/// A parsed `--store` URL.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// The embedded memory store (`memory`), holding at most `capacity` keys.
    Memory {
        /// The most keys held.
        capacity: usize,
    },
    /// A network store: its kind (`redis`, `redis+cluster`, …) and the full URL.
    Network {
        /// The scheme.
        scheme: String,
        /// The URL as given (may hold a password: print it with `Display`, which redacts).
        url: String,
    },
}

/// A `--store` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreUrlError {
    /// Not a scheme Weir knows.
    #[error("unsupported store '{given}': supported are {SUPPORTED_STORES}")]
    Unknown {
        /// What was given (redacted).
        given: String,
    },
    /// The store rejected the URL or an option (the message never holds a password).
    #[error("{0}")]
    Invalid(String),
}

impl StoreSpec {
    /// The memory store with its default capacity (1 048 576 keys).
    pub const DEFAULT_MEMORY_CAPACITY: usize = 1 << 20;

    /// Parses `memory`, `memory://`, or a network URL.
    ///
    /// ```
    /// use weir_server::StoreSpec;
    /// assert!(matches!(StoreSpec::parse("memory"), Ok(StoreSpec::Memory { .. })));
    /// let err = StoreSpec::parse("mongodb://db:27017").unwrap_err();
    /// assert!(err.to_string().starts_with("unsupported store 'mongodb://db:27017'"));
    /// ```
    pub fn parse(url: &str) -> Result<StoreSpec, StoreUrlError> {
        let url = url.trim();
        if url == "memory" || url == "memory://" {
            return Ok(StoreSpec::Memory {
                capacity: Self::DEFAULT_MEMORY_CAPACITY,
            });
        }
        let scheme = url.split_once("://").map(|(scheme, _)| scheme);
        match scheme {
            Some(
                scheme @ ("redis" | "rediss" | "redis+cluster" | "redis+sentinel" | "memcached"),
            ) => Ok(StoreSpec::Network {
                scheme: scheme.to_string(),
                url: url.to_string(),
            }),
            _ => Err(StoreUrlError::Unknown { given: redact(url) }),
        }
    }

    /// The store's kind, for logs and the `store` metrics label: `memory`, `redis`, ….
    pub fn kind(&self) -> &str {
        match self {
            StoreSpec::Memory { .. } => "memory",
            StoreSpec::Network { scheme, .. } => scheme,
        }
    }
}

impl fmt::Display for StoreSpec {
    /// The URL with any password replaced by `***`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreSpec::Memory { capacity } => write!(f, "memory (capacity {capacity} keys)"),
            StoreSpec::Network { url, .. } => f.write_str(&redact(url)),
        }
    }
}

impl fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StoreSpec({self})")
    }
}

/// `scheme://user:secret@host` → `scheme://user:***@host` (every host of a list).
pub(crate) fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, hosts)) = rest.rsplit_once('@') else {
        return url.to_string();
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    if userinfo.contains(':') {
        format!("{scheme}://{user}:***@{hosts}")
    } else {
        format!("{scheme}://***@{hosts}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_parsed_and_passwords_never_printed() {
        let spec = StoreSpec::parse("redis://app:s3cret@10.0.0.1:6379/0").unwrap();
        assert_eq!(spec.kind(), "redis");
        assert_eq!(spec.to_string(), "redis://app:***@10.0.0.1:6379/0");
        assert_eq!(
            StoreSpec::parse("redis+cluster://h1:7000,h2:7001")
                .unwrap()
                .kind(),
            "redis+cluster"
        );
        let err = StoreSpec::parse("postgres://u:pw@db/x").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("unsupported store 'postgres://u:***@db/x': supported are {SUPPORTED_STORES}")
        );
    }
}
