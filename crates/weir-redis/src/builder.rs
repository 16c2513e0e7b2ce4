//! Building a [`RedisStore`]: the deployment URL and the options (timeout, key prefix,
//! whose clock, TTL grace, TLS files). No I/O happens here but reading the TLS files; the
//! first call connects.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

use redis::AsyncConnectionConfig;

use crate::batch::{Batcher, Batching};
use crate::connection::Link;
use crate::error::BuildError;
use crate::exec::Exec;
use crate::keys;
use crate::scripts::Path;
use crate::shards::Shards;
use crate::store::{Inner, RedisStore, TimeSource};
use crate::tls::TlsFiles;
use crate::url::{self, Target};

/// Options of a [`RedisStore`].
///
/// ```no_run
/// use std::time::Duration;
/// use weir_redis::{RedisStore, TimeSource};
///
/// let store = RedisStore::builder("redis+cluster://10.0.0.1:6379,10.0.0.2:6379")
///     .timeout(Duration::from_millis(30))
///     .prefix("rl")
///     .time_source(TimeSource::Store)
///     .build()?;
/// # Ok::<(), weir_redis::BuildError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RedisStoreBuilder {
    url: String,
    timeout: Duration,
    first_timeout: Duration,
    prefix: String,
    time: TimeSource,
    ttl_grace: Option<Duration>,
    batching: Option<Batching>,
    tls: TlsFiles,
    /// The scripts' path (tests of the general path alone: [`Path::General`]).
    pub(crate) path: Path,
    /// `EVALSHA` from the start, as on a server without functions (tests of that form).
    pub(crate) eval: bool,
}

impl RedisStore {
    /// The default timeout of every store call.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_millis(500);
    /// The default bound of calls until the store has answered once (connecting, loading a
    /// Cluster's slot map and the function library on each node).
    pub const DEFAULT_FIRST_TIMEOUT: Duration = Duration::from_secs(5);
    /// The default TTL grace under [`TimeSource::Process`] (clock skew between the
    /// application servers that share the store).
    pub const DEFAULT_PROCESS_GRACE: Duration = Duration::from_secs(1);

    /// Options for a store at `url` (see the crate docs for the URL forms).
    pub fn builder(url: impl Into<String>) -> RedisStoreBuilder {
        RedisStoreBuilder {
            url: url.into(),
            timeout: Self::DEFAULT_TIMEOUT,
            first_timeout: Self::DEFAULT_FIRST_TIMEOUT,
            prefix: "weir".to_owned(),
            time: TimeSource::default(),
            ttl_grace: None,
            batching: None,
            tls: TlsFiles::default(),
            path: Path::Fast,
            eval: false,
        }
    }

    /// A store at `url` with the default options.
    pub fn open(url: impl Into<String>) -> Result<Self, BuildError> {
        Self::builder(url).build()
    }
}

impl RedisStoreBuilder {
    /// How long any store call may take, connecting included (default
    /// [`RedisStore::DEFAULT_TIMEOUT`]). Past it the call fails with
    /// [`StoreError::Timeout`](weir_core::StoreError::Timeout).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The longest a call may take until the store has answered once (default
    /// [`RedisStore::DEFAULT_FIRST_TIMEOUT`], never below `timeout`): a new connection, a
    /// fresh Cluster's slot map and the function library loaded on each node take longer
    /// than a decision, and are not an outage.
    pub fn first_timeout(mut self, first_timeout: Duration) -> Self {
        self.first_timeout = first_timeout;
        self
    }

    /// The prefix of every Redis key (default `weir`); no braces.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Whose clock decides (default [`TimeSource::Store`]).
    pub fn time_source(mut self, time: TimeSource) -> Self {
        self.time = time;
        self
    }

    /// How long past its freshness a key is kept by its TTL (default: zero under the store
    /// clock, [`RedisStore::DEFAULT_PROCESS_GRACE`] under the process clock). Keeping a
    /// key longer never changes a decision; dropping it early under a skewed process
    /// clock would.
    pub fn ttl_grace(mut self, grace: Duration) -> Self {
        self.ttl_grace = Some(grace);
        self
    }

    /// `rediss://` only: trust the CA (or CAs) in this PEM file instead of the system's
    /// roots (the URL may say it instead: `?ca=/path`). Read when the store is built.
    ///
    /// ```no_run
    /// use weir_redis::RedisStore;
    ///
    /// let store = RedisStore::builder("rediss://redis.internal:6380")
    ///     .tls_ca("/etc/weir/redis-ca.pem")
    ///     .tls_client_cert("/etc/weir/client.pem", "/etc/weir/client.key")
    ///     .build()?;
    /// # Ok::<(), weir_redis::BuildError>(())
    /// ```
    pub fn tls_ca(mut self, ca: impl Into<PathBuf>) -> Self {
        self.tls.ca = Some(ca.into());
        self
    }

    /// `rediss://` only: show this client certificate chain (PEM) with its private key
    /// (PEM: PKCS#8, PKCS#1 or SEC1), for a server that asks for one (mutual TLS; the URL
    /// may say it instead: `?cert=/path&key=/path`). Read when the store is built.
    pub fn tls_client_cert(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.tls.cert = Some(cert.into());
        self.tls.key = Some(key.into());
        self
    }

    /// Coalesces concurrent decisions into one script call: up to `max_decisions` (1 to
    /// 1000), gathered for at most `max_wait` (up to 1 s; zero takes only what is already
    /// waiting, and sends a decision that finds nothing in flight or waiting directly, as
    /// an unbatched store would) after the first one arrives. Off by default. Each decision runs exactly
    /// as it would alone; the batch costs one round trip and one script call instead of
    /// one each, at the price of up to `max_wait` more latency. On a Cluster, decisions
    /// are coalesced per hash slot. `check_all` is never batched.
    pub fn batch(mut self, max_decisions: usize, max_wait: Duration) -> Self {
        self.batching = Some(Batching {
            max_decisions,
            max_wait,
        });
        self
    }

    /// Builds the store. Parses the URL; connects on first use.
    pub fn build(self) -> Result<RedisStore, BuildError> {
        if self.timeout.is_zero() {
            return Err(BuildError::Option {
                option: "timeout",
                reason: "must be greater than zero",
            });
        }
        if !keys::prefix_is_valid(&self.prefix) {
            return Err(BuildError::Option {
                option: "prefix",
                reason: "must not contain `{` or `}`",
            });
        }
        if let Some(b) = self.batching {
            if b.max_decisions == 0 || b.max_decisions > 1_000 {
                return Err(BuildError::Option {
                    option: "batch.max_decisions",
                    reason: "must be 1 to 1000",
                });
            }
            if b.max_wait > Duration::from_secs(1) {
                return Err(BuildError::Option {
                    option: "batch.max_wait",
                    reason: "must be at most 1 s",
                });
            }
        }
        let first = self.timeout.max(self.first_timeout);
        let (target, redactor) = url::parse(&self.url, first, &self.tls)?;
        let cluster = matches!(target, Target::Cluster(..));
        let shards = match &target {
            Target::Cluster(_, access) => Some(Arc::new(Shards::new(
                access.as_ref().clone(),
                self.timeout,
                redactor.clone(),
            ))),
            _ => None,
        };
        let grace = self.ttl_grace.unwrap_or(match self.time {
            TimeSource::Store => Duration::ZERO,
            TimeSource::Process => RedisStore::DEFAULT_PROCESS_GRACE,
        });
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(first))
            .set_response_timeout(None);
        let exec = Arc::new(Exec {
            link: Link::new(target, config),
            redactor,
            timeout: self.timeout,
            first_timeout: first,
            answered: AtomicBool::new(false),
            shards,
            mapped: AtomicU64::new(0),
            grace_ms: u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            path: self.path,
            eval: AtomicBool::new(self.eval),
        });
        Ok(RedisStore {
            inner: Arc::new(Inner {
                batcher: self
                    .batching
                    .map(|b| Batcher::new(b, exec.clone(), cluster)),
                exec,
                prefix: self.prefix,
                time: self.time,
                cluster,
            }),
        })
    }
}
