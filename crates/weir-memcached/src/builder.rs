//! Building a [`MemcachedStore`]: the servers, the pool size, the per-call timeout, the CAS
//! retry bound and the key prefix, checked once. Nothing connects here; the first call
//! does. Depends on the store and its context; neither knows this module. The list of
//! servers is read by `addresses.rs`; what can be wrong is `error.rs`.

use std::time::Duration;

use crate::addresses::addresses;
use crate::client::Pool;
use crate::context::{Inner, Server};
use crate::error::ConfigError;
use crate::keys::{is_valid_prefix, MAX_PREFIX_LEN};
use crate::store::MemcachedStore;

/// Settings of a [`MemcachedStore`].
///
/// One server, or several with each key on one of them (a consistent-hash ring: see the
/// [crate docs](crate#several-servers)):
///
/// ```
/// use std::time::Duration;
/// use weir_memcached::{MemcachedStore, MemcachedStoreBuilder};
///
/// let store = MemcachedStore::builder("memcached://127.0.0.1:11211")
///     .pool_size(4)
///     .timeout(Duration::from_millis(20))
///     .prefix("api:")
///     .build()?;
/// // The list envoyproxy/ratelimit's MEMCACHE_HOST_PORT takes, as a URL...
/// let store = MemcachedStore::builder("memcache://10.0.0.1:11211,10.0.0.2:11211").build()?;
/// // ...or as a list.
/// let store = MemcachedStoreBuilder::default()
///     .servers(["10.0.0.1:11211", "10.0.0.2:11211", "10.0.0.3:11211"])
///     .build()?;
/// # Ok::<(), weir_memcached::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct MemcachedStoreBuilder {
    /// As given: each an address or a comma-separated list, optionally after a scheme.
    servers: Vec<String>,
    pool_size: usize,
    timeout: Duration,
    max_retries: u32,
    prefix: String,
    ttl_grace: Duration,
}

impl MemcachedStore {
    /// A store for the memcached at `addr` with the default settings; see
    /// [`MemcachedStore::builder`] for what `addr` may be.
    pub fn new(addr: &str) -> Result<Self, ConfigError> {
        Self::builder(addr).build()
    }

    /// A builder for the memcached at `addr`: `host:port`, or several separated by commas
    /// (each key then lives on one of them), optionally after `memcached://` or
    /// `memcache://`.
    pub fn builder(addr: &str) -> MemcachedStoreBuilder {
        MemcachedStoreBuilder::default().servers([addr])
    }
}

impl Default for MemcachedStoreBuilder {
    /// The default settings, with no server yet: give them with
    /// [`servers`](Self::servers).
    fn default() -> Self {
        Self {
            servers: Vec::new(),
            pool_size: Self::DEFAULT_POOL_SIZE,
            timeout: Self::DEFAULT_TIMEOUT,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            prefix: Self::DEFAULT_PREFIX.to_owned(),
            ttl_grace: Duration::ZERO,
        }
    }
}

impl MemcachedStoreBuilder {
    /// The default pool size: connections, each carrying many calls at once.
    pub const DEFAULT_POOL_SIZE: usize = 2;
    /// The default timeout of one round trip (including connecting, if needed).
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
    /// The default number of retries after a CAS conflict.
    pub const DEFAULT_MAX_RETRIES: u32 = 64;
    /// The default key prefix.
    pub const DEFAULT_PREFIX: &'static str = "weir:";
    /// The largest pool accepted (memcached's default connection limit is 1024 in all).
    pub const MAX_POOL_SIZE: usize = 1024;
    /// The most servers accepted in one list.
    pub const MAX_SERVERS: usize = 256;

    /// The servers, replacing any given before: each `host:port` (or a comma-separated list
    /// of them), optionally after `memcached://` or `memcache://`. Each key lives on one of
    /// them, placed by a consistent-hash ring of their names: every instance sharing limits
    /// must list the same servers by the same names (in any order).
    pub fn servers<I, S>(mut self, servers: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.servers = servers.into_iter().map(|s| s.as_ref().to_owned()).collect();
        self
    }

    /// This many connections to each server, each carrying many calls at once (pipelined:
    /// the calls queued while one write is under way go out together in the next). Calls
    /// take the connections in turn and never wait for one another. Few connections batch
    /// more per write; the default of 2 did 2x the old 16 one-call-at-a-time connections at
    /// 64 concurrent calls on 2 cores (BENCHMARKS.md), and 1 about as well.
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

    /// How long past its freshness memcached keeps a record (default: none beyond the
    /// second memcached's own clock may take). Keeping a record longer never changes a
    /// decision (its own expiry decides); it only holds memory. For callers whose clock is
    /// not memcached's: the tests drive the store with a manual clock, whose seconds pass in
    /// a fraction of real ones, so they keep records ten minutes longer.
    pub fn ttl_grace(mut self, grace: Duration) -> Self {
        self.ttl_grace = grace;
        self
    }

    /// Checks the settings and builds the store (without connecting).
    pub fn build(self) -> Result<MemcachedStore, ConfigError> {
        let addrs = addresses(&self.servers, Self::MAX_SERVERS)?;
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
            return Err(ConfigError::too_large(
                "pool_size",
                self.pool_size,
                Self::MAX_POOL_SIZE,
            ));
        }
        if self.timeout.is_zero() {
            return Err(ConfigError::Zero { param: "timeout" });
        }
        let servers = addrs
            .into_iter()
            .map(|addr| Server {
                pool: Pool::new(addr.clone(), self.pool_size, self.timeout),
                addr,
            })
            .collect();
        let mut inner = Inner::new(servers, self.prefix, self.max_retries);
        // Whole seconds, rounded up (memcached's TTLs are in seconds).
        inner.ttl_grace_s = u32::try_from(self.ttl_grace.as_secs())
            .unwrap_or(u32::MAX)
            .saturating_add(u32::from(self.ttl_grace.subsec_nanos() > 0));
        Ok(MemcachedStore::from_inner(inner))
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

    #[test]
    fn a_list_of_servers_is_checked() {
        let err = |b: MemcachedStoreBuilder| b.build().unwrap_err().to_string();
        assert_eq!(
            err(MemcachedStoreBuilder::default()),
            "no memcached server is given: list at least one host:port"
        );
        assert_eq!(
            err(MemcachedStore::builder("memcache://h1:1,H1:1")),
            "memcached server \"H1:1\" is listed twice"
        );
        assert!(MemcachedStoreBuilder::default()
            .servers(["h1:1", "h2:1"])
            .build()
            .is_ok());
    }
}
