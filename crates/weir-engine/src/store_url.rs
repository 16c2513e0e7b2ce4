//! `--store URL`: which store the engine decides on, parsed into a [`StoreSpec`] before
//! anything connects. Opening it is `store.rs`. Passwords in URLs (a socket's `pass=`
//! too) are never printed.

use std::fmt;

/// The schemes `--store` accepts, for messages.
pub const SUPPORTED_STORES: &str = "memory, redis://, rediss://, unix://, redis+unix://, \
     redis+cluster://, redis+sentinel://, memcached:// (or memcache://)";

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
        /// The scheme (`redis+unix` for `unix://` too).
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

    /// Parses `memory`, `memory://`, or a network URL. Redis over TLS is
    /// `rediss://host:port[?ca=PATH][&cert=PATH&key=PATH]`; on a Unix socket
    /// `unix:///path/redis.sock[?db=N&pass=P]` (or `redis+unix://`). The Redis store checks
    /// the rest when it is built.
    ///
    /// ```
    /// use weir_engine::StoreSpec;
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
            Some("unix" | "redis+unix") => Ok(StoreSpec::Network {
                scheme: "redis+unix".to_string(),
                url: url.to_string(),
            }),
            Some(scheme @ ("redis" | "rediss" | "redis+cluster" | "redis+sentinel")) => {
                Ok(StoreSpec::Network {
                    scheme: scheme.to_string(),
                    url: url.to_string(),
                })
            }
            // One server or a comma-separated list, each key on one of them (`memcache://`
            // as envoyproxy/ratelimit's MEMCACHE_HOST_PORT names it); the memcached store
            // checks the addresses when it is built.
            Some("memcached" | "memcache") => Ok(StoreSpec::Network {
                scheme: "memcached".to_string(),
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

/// `scheme://user:secret@host` → `scheme://user:***@host` (every host of a list), and a
/// query's `pass=secret` → `pass=***`.
pub(crate) fn redact(url: &str) -> String {
    let Some((url, query)) = url.split_once('?') else {
        return redact_userinfo(url);
    };
    let query: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((name @ ("pass" | "password"), _)) => format!("{name}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{}?{}", redact_userinfo(url), query.join("&"))
}

fn redact_userinfo(url: &str) -> String {
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
        let spec = StoreSpec::parse("rediss://:s3cret@redis.internal:6380?ca=/etc/ca.pem").unwrap();
        assert_eq!(spec.kind(), "rediss");
        assert_eq!(
            spec.to_string(),
            "rediss://:***@redis.internal:6380?ca=/etc/ca.pem"
        );
        for socket in [
            "unix:///run/redis.sock?db=2&pass=s3cret",
            "redis+unix:///run/redis.sock?db=2&pass=s3cret",
        ] {
            let spec = StoreSpec::parse(socket).unwrap();
            // `store.rs` opens every `redis…` kind with the Redis store.
            assert_eq!(spec.kind(), "redis+unix");
            assert!(spec
                .to_string()
                .ends_with(":///run/redis.sock?db=2&pass=***"));
        }
        let err = StoreSpec::parse("postgres://u:pw@db/x").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("unsupported store 'postgres://u:***@db/x': supported are {SUPPORTED_STORES}")
        );
    }

    /// `--store unix://…` reaches a redis-server on a socket through the server's own
    /// store (guards and all), and a `rediss://` option the Redis store cannot use is
    /// refused when the store is opened, naming it, never the password.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn socket_and_tls_urls_open_the_redis_store() {
        use crate::store::{AnyStore, StoreClock};
        use weir_core::{Key, Op, Outcome, Rule, Store};
        use weir_resilience::FailoverConfig;
        use weir_testkit::servers::RedisSocketServer;

        let redis = RedisSocketServer::start();
        let failover = FailoverConfig {
            timeout: std::time::Duration::from_secs(2),
            ..FailoverConfig::default()
        };
        let spec = StoreSpec::parse(&redis.url()).unwrap();
        let store = AnyStore::open(&spec, failover, StoreClock::Process).unwrap();
        store.ping().await.unwrap();
        let rule = Rule::per_second(1).unwrap();
        let key = Key::new("socket").unwrap();
        let outcome = store
            .apply(
                weir_core::ScopedKey::plain(&key),
                &rule,
                Op::Check { cost: 1 },
                weir_testkit::T0_NS,
            )
            .await
            .unwrap();
        assert!(matches!(outcome, Outcome::Decision(d) if d.allowed));
        assert_eq!(redis.raw("DBSIZE").as_deref(), Some(":1\r\n"));

        let spec = StoreSpec::parse("rediss://:hunter2@h:1?ca=/nonexistent/ca.pem").unwrap();
        let err = AnyStore::open(&spec, failover, StoreClock::Store).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("rediss://:***@h:1: cannot read the CA file /nonexistent/ca.pem"),
            "{msg}"
        );
    }

    /// `memcached://` and `memcache://` take one server or a list (each key on one of
    /// them); both open the memcached store, whose metrics label is `memcached`, and a bad
    /// address in the list is refused when the store is opened, naming it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn memcached_urls_take_a_list_of_servers() {
        use crate::store::{AnyStore, StoreClock};
        use weir_core::{Key, Op, Outcome, Rule, Store};
        use weir_resilience::FailoverConfig;
        use weir_testkit::servers::Memcached;

        let (a, b) = (Memcached::start(), Memcached::start());
        let url = format!("memcache://127.0.0.1:{},127.0.0.1:{}", a.port(), b.port());
        let spec = StoreSpec::parse(&url).unwrap();
        assert_eq!(spec.kind(), "memcached");
        assert_eq!(StoreSpec::parse(&a.url()).unwrap().kind(), "memcached");
        let failover = FailoverConfig {
            timeout: std::time::Duration::from_secs(2),
            ..FailoverConfig::default()
        };
        let store = AnyStore::open(&spec, failover, StoreClock::Process).unwrap();
        store.ping().await.unwrap();
        let rule = Rule::per_second(2).unwrap();
        for i in 0..8 {
            let key = Key::new(format!("listed:{i}")).unwrap();
            let outcome = store
                .apply(
                    weir_core::ScopedKey::plain(&key),
                    &rule,
                    Op::Check { cost: 1 },
                    weir_testkit::T0_NS,
                )
                .await
                .unwrap();
            assert!(matches!(outcome, Outcome::Decision(d) if d.allowed));
        }

        let spec = StoreSpec::parse("memcache://h1:11211,h2").unwrap();
        let err = AnyStore::open(&spec, failover, StoreClock::Process).unwrap_err();
        assert_eq!(err.to_string(), "memcached address \"h2\" is not host:port");
    }
}
