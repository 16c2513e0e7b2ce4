//! Building a [`MemcachedStore`]: the server address, the pool size, the per-call timeout,
//! the CAS retry bound and the key prefix, checked once. Nothing connects here; the first
//! call does.

use std::time::Duration;

use crate::backoff::Backoff;
use crate::client::Pool;
use crate::keys::{is_valid_prefix, MAX_PREFIX_LEN};
use crate::store::{Inner, MemcachedStore};

/// A setting of the store is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The address is not `host:port` (optionally after `memcached://`).
    #[error("memcached address {addr:?} is not host:port")]
    Address {
        /// The address given.
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

/// Settings of a [`MemcachedStore`].
///
/// ```
/// use std::time::Duration;
/// use weir_memcached::MemcachedStore;
///
/// let store = MemcachedStore::builder("memcached://127.0.0.1:11211")
///     .pool_size(4)
///     .timeout(Duration::from_millis(20))
///     .prefix("api:")
///     .build()?;
/// # Ok::<(), weir_memcached::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MemcachedStoreBuilder {
    addr: String,
    pool_size: usize,
    timeout: Duration,
    max_retries: u32,
    prefix: String,
}

impl MemcachedStoreBuilder {
    /// The default pool size: connections, each carrying many calls at once.
    pub const DEFAULT_POOL_SIZE: usize = 2;
    /// The default timeout of one round trip (including connecting, if needed).
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(50);
    /// The default number of retries after a CAS conflict.
    pub const DEFAULT_MAX_RETRIES: u32 = 64;
    /// The default key prefix.
    pub const DEFAULT_PREFIX: &'static str = "weir:";
    /// The largest pool accepted (memcached's default connection limit is 1024 in all).
    pub const MAX_POOL_SIZE: usize = 1024;

    pub(crate) fn new(addr: &str) -> Self {
        Self {
            addr: addr.to_owned(),
            pool_size: Self::DEFAULT_POOL_SIZE,
            timeout: Self::DEFAULT_TIMEOUT,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            prefix: Self::DEFAULT_PREFIX.to_owned(),
        }
    }

    /// This many connections, each carrying many calls at once (pipelined: the calls queued
    /// while one write is under way go out together in the next). Calls take the connections
    /// in turn and never wait for one another. Few connections batch more per write; the
    /// default of 2 did 2x the old 16 one-call-at-a-time connections at 64 concurrent calls
    /// on 2 cores (BENCHMARKS.md), and 1 about as well.
    pub fn pool_size(mut self, size: usize) -> Self {
        self.pool_size = size;
        self
    }

    /// The most one round trip may take, connecting included. A call that takes longer fails
    /// with `StoreError::Timeout`, and its connection takes no new calls (it is replaced).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// How many times a decision is tried again after a CAS conflict before it fails with
    /// `StoreError::Unavailable`.
    pub fn max_retries(mut self, retries: u32) -> Self {
        self.max_retries = retries;
        self
    }

    /// A prefix for every memcached key this store writes, so several applications can share
    /// a server. Every instance sharing limits must use the same prefix.
    pub fn prefix(mut self, prefix: &str) -> Self {
        self.prefix = prefix.to_owned();
        self
    }

    /// Checks the settings and builds the store (without connecting).
    pub fn build(self) -> Result<MemcachedStore, ConfigError> {
        let addr = self
            .addr
            .strip_prefix("memcached://")
            .unwrap_or(&self.addr)
            .trim_end_matches('/');
        let valid_addr = addr
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid_addr {
            return Err(ConfigError::Address { addr: self.addr });
        }
        if !is_valid_prefix(&self.prefix) {
            return Err(ConfigError::Prefix {
                prefix: self.prefix,
                max: MAX_PREFIX_LEN,
            });
        }
        if self.pool_size == 0 {
            return Err(ConfigError::Zero { param: "pool_size" });
        }
        if self.pool_size > Self::MAX_POOL_SIZE {
            return Err(ConfigError::TooLarge {
                param: "pool_size",
                value: u64::try_from(self.pool_size).unwrap_or(u64::MAX),
                max: u64::try_from(Self::MAX_POOL_SIZE).unwrap_or(u64::MAX),
            });
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::Zero { param: "timeout" });
        }
        Ok(MemcachedStore::from_inner(Inner {
            pool: Pool::new(addr.to_owned(), self.pool_size, self.timeout),
            prefix: self.prefix,
            max_retries: self.max_retries,
            backoff: Backoff::new(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_settings_are_named() {
        let err = |b: MemcachedStoreBuilder| b.build().unwrap_err().to_string();
        assert_eq!(
            err(MemcachedStore::builder("localhost")),
            "memcached address \"localhost\" is not host:port"
        );
        assert_eq!(
            err(MemcachedStore::builder("h:1").prefix("a b")),
            "key prefix \"a b\" must be at most 64 printable ASCII characters without spaces"
        );
        assert_eq!(
            err(MemcachedStore::builder("h:1").pool_size(0)),
            "pool_size must be greater than zero"
        );
        assert_eq!(
            err(MemcachedStore::builder("h:1").pool_size(5000)),
            "pool_size is 5000, above the maximum of 1024"
        );
        assert!(MemcachedStore::new("memcached://127.0.0.1:11211").is_ok());
        assert!(MemcachedStore::new("[::1]:11211").is_ok());
    }
}
