//! [`ConfigError`]: what is wrong with a setting of the store, found when it is built
//! (`builder.rs`, `addresses.rs`), before anything connects. A leaf: it imports nothing of
//! the crate.

/// A setting of the store is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A server's address is not `host:port` (optionally after `memcached://` or
    /// `memcache://`).
    #[error("memcached address {addr:?} is not host:port")]
    Address {
        /// The address given.
        addr: String,
    },
    /// No server was given.
    #[error("no memcached server is given: list at least one host:port")]
    NoServers,
    /// One server is listed twice (it would hold a double share of the keys, under two
    /// names, which is never meant).
    #[error("memcached server {addr:?} is listed twice")]
    DuplicateServer {
        /// The address listed twice.
        addr: String,
    },
    /// The prefix has a space or a control character, or is too long.
    #[error(
        "key prefix {prefix:?} must be at most {max} printable ASCII characters without spaces"
    )]
    Prefix {
        /// The prefix given.
        prefix: String,
        /// The longest prefix accepted.
        max: usize,
    },
    /// A setting that must be positive is zero.
    #[error("{param} must be greater than zero")]
    Zero {
        /// The setting's name.
        param: &'static str,
    },
    /// A setting is above what the store supports.
    #[error("{param} is {value}, above the maximum of {max}")]
    TooLarge {
        /// The setting's name.
        param: &'static str,
        /// The value given.
        value: u64,
        /// The largest value accepted.
        max: u64,
    },
}

impl ConfigError {
    /// `value` of `param` is above `max`.
    pub(crate) fn too_large(param: &'static str, value: usize, max: usize) -> Self {
        Self::TooLarge {
            param,
            value: u64::try_from(value).unwrap_or(u64::MAX),
            max: u64::try_from(max).unwrap_or(u64::MAX),
        }
    }
}
