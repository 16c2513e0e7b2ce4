//! Building a [`MemcachedStore`]: the servers, the pool size, the per-call timeout, the CAS
//! retry bound and the key prefix, checked once. Nothing connects here; the first call
//! does. Depends on the store and its context; neither knows this module.

use std::time::Duration;

use crate::client::Pool;
use crate::context::{Inner, Server};
use crate::keys::{is_valid_prefix, MAX_PREFIX_LEN};
use crate::store::MemcachedStore;

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
        }
    }
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

    /// Checks the settings and builds the store (without connecting).
    pub fn build(self) -> Result<MemcachedStore, ConfigError> {
        let addrs = addresses(&self.servers)?;
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
            return Err(too_large("pool_size", self.pool_size, Self::MAX_POOL_SIZE));
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
        Ok(MemcachedStore::from_inner(Inner::new(
            servers,
            self.prefix,
            self.max_retries,
        )))
    }
}

fn too_large(param: &'static str, value: usize, max: usize) -> ConfigError {
    ConfigError::TooLarge {
        param,
        value: u64::try_from(value).unwrap_or(u64::MAX),
        max: u64::try_from(max).unwrap_or(u64::MAX),
    }
}

/// The `host:port` of every server in `given` (each an address or a list, after an
/// optional scheme), checked: at least one, each valid, none twice.
fn addresses(given: &[String]) -> Result<Vec<String>, ConfigError> {
    let mut addrs: Vec<String> = Vec::new();
    for entry in given {
        let list = entry.trim();
        let list = list
            .strip_prefix("memcached://")
            .or_else(|| list.strip_prefix("memcache://"))
            .unwrap_or(list)
            .trim_end_matches('/');
        for addr in list.split(',').map(str::trim) {
            let valid = addr.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty()
                    && !host.contains(|c: char| c.is_whitespace() || c == '/')
                    && port.parse::<u16>().is_ok()
            });
            if !valid {
                let addr = if addr.is_empty() { entry } else { addr };
                return Err(ConfigError::Address {
                    addr: addr.to_owned(),
                });
            }
            if addrs.iter().any(|a| a.eq_ignore_ascii_case(addr)) {
                return Err(ConfigError::DuplicateServer {
                    addr: addr.to_owned(),
                });
            }
            addrs.push(addr.to_owned());
        }
    }
    if addrs.is_empty() {
        return Err(ConfigError::NoServers);
    }
    if addrs.len() > MemcachedStoreBuilder::MAX_SERVERS {
        return Err(too_large(
            "servers",
            addrs.len(),
            MemcachedStoreBuilder::MAX_SERVERS,
        ));
    }
    Ok(addrs)
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
    fn server_lists_are_parsed_like_memcache_host_port() {
        let ok =
            |given: &[&str]| addresses(&given.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        assert_eq!(
            ok(&["memcache://h1:11211,h2:11212/"]).unwrap(),
            ["h1:11211", "h2:11212"]
        );
        assert_eq!(
            ok(&["memcached://h1:1, h2:2", "[::1]:3"]).unwrap(),
            ["h1:1", "h2:2", "[::1]:3"]
        );
        assert_eq!(ok(&[]), Err(ConfigError::NoServers));
        assert_eq!(
            ok(&["memcache://"]),
            Err(ConfigError::Address {
                addr: "memcache://".into()
            })
        );
        assert_eq!(
            ok(&["h1:1,,h2:2"]),
            Err(ConfigError::Address {
                addr: "h1:1,,h2:2".into()
            })
        );
        assert_eq!(
            ok(&["h1:1,h2:99999"]),
            Err(ConfigError::Address {
                addr: "h2:99999".into()
            })
        );
        assert_eq!(
            ok(&["redis://h:1"]),
            Err(ConfigError::Address {
                addr: "redis://h:1".into()
            })
        );
        let many: Vec<String> = (0..300).map(|i| format!("h{i}:1")).collect();
        assert_eq!(
            addresses(&many).unwrap_err().to_string(),
            "servers is 300, above the maximum of 256"
        );
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
