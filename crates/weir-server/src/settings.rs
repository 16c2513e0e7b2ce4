//! Everything `weir serve` can be told, with the documented defaults. The CLI fills this
//! from flags and `WEIR_*` variables; tests build it directly (and inject a `ManualClock`).

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use weir_resilience::{FailoverConfig, LeaseConfig};

use crate::admin_token::AdminToken;
use crate::headers::{HeaderStyle, ResponseHeaders};
use crate::reload::ReloadSettings;
use crate::rules::{RuleCheck, RuleSource};
use crate::shared_clock::SharedClock;
use crate::store::{StoreClock, StoreOptions};
use crate::store_url::StoreSpec;
use crate::tls::TlsFiles;

/// Settings of one server.
///
/// ```
/// use std::time::Duration;
/// use weir_server::Settings;
///
/// let mut settings = Settings::default(); // example rules, memory store
/// settings.shadow = true;
/// settings.request_timeout = Duration::from_secs(2);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// The rules: a file or directory, or the built-in example (the default).
    pub rules: RuleSource,
    /// The store (default: the memory store).
    pub store: StoreSpec,
    /// The failover guard of a network store: timeouts, breaker, instance count.
    pub failover: FailoverConfig,
    /// The prefix of every key a network store writes (default: the store's, `weir`).
    /// Instances sharing limits must use the same one.
    pub key_prefix: Option<String>,
    /// Redis: coalesce concurrent decisions into one script call, gathered for at most this
    /// long (default: off; envoyproxy/ratelimit's `REDIS_PIPELINE_WINDOW`).
    pub redis_batch_wait: Option<Duration>,
    /// Redis: the most decisions in one batched call (default 100).
    pub redis_batch_size: usize,
    /// How rules with `mode: leased` claim and age their slices on a network store (the
    /// instance count is the failover's).
    pub lease: LeaseConfig,
    /// Whose clock a network store decides by (default: the store's own, where it has one).
    pub store_clock: StoreClock,
    /// Global shadow mode: every denial is counted and reported, none enforced.
    pub shadow: bool,
    /// The admin API's token; `None` disables the admin API (its routes answer 404).
    pub admin_token: Option<AdminToken>,
    /// Whether the decision endpoints (`/v1/check`, `/json`, `/v1/acquire`, `/v1/release`)
    /// are served (default yes). `weir proxy` turns them off unless asked: on its API
    /// listener they would let anyone who reaches it spend clients' budgets.
    pub decision_api: bool,
    /// Which rate-limit headers `/v1/check` answers carry (default: the IETF ones).
    pub headers: HeaderStyle,
    /// Which headers Envoy is asked to add to its responses (gRPC and `/json`; default
    /// none, as envoyproxy/ratelimit: they would show rule ids to end clients).
    pub envoy_headers: ResponseHeaders,
    /// The share of a limit used past which an allowed decision counts as `near_limit`
    /// (default 0.8, envoyproxy/ratelimit's `NEAR_LIMIT_RATIO`).
    pub near_limit_ratio: f64,
    /// The clock of every decision (default: the system clock).
    pub clock: SharedClock,
    /// When the rules are read again.
    pub reload: ReloadSettings,
    /// Whether a server whose network store does not answer (each rule's failure policy
    /// deciding) is still ready (default yes). Off, `/readyz`, `/healthcheck` and the gRPC
    /// health service say not ready then, as envoyproxy/ratelimit with
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`.
    pub ready_in_fallback: bool,
    /// How often the memory store is swept of expired keys (default 10 s).
    pub sweep_interval: Duration,
    /// The longest one HTTP or gRPC request may take (default 5 s).
    pub request_timeout: Duration,
    /// How long an HTTP client may take to send a request's headers, and how long an idle
    /// keep-alive connection stays open (default 10 s); then the connection is closed.
    pub header_read_timeout: Duration,
    /// The largest HTTP request body or gRPC message accepted (default 64 KiB).
    pub max_body_bytes: usize,
    /// The largest total of an HTTP request's header names and values (default 16 KiB):
    /// past it the answer is `431` (JSON). hyper reads a request head (request line and
    /// headers) of at most twice this and answers a longer one `431` itself, unparsed. Also
    /// the gRPC listener's HTTP/2 header list limit.
    pub max_header_bytes: usize,
    /// The most connections each listener (HTTP, gRPC) keeps open at once (default 4096).
    /// At the cap a new connection is closed as soon as it is accepted (the client sees the
    /// connection close at once and can go elsewhere; nothing waits in the kernel's backlog),
    /// and the open ones keep being served.
    pub max_connections: NonZeroUsize,
    /// How long a gRPC connection may go without a request in flight before it is closed
    /// (HTTP/2 GOAWAY; default 5 min). The HTTP listener's idle bound is
    /// `header_read_timeout`.
    pub grpc_idle_timeout: Duration,
    /// How often the gRPC listener pings a connection it has heard nothing from (HTTP/2
    /// PING; default 60 s); a peer that does not answer within `grpc_keepalive_timeout`
    /// (default 20 s) is dropped. A connection closing when idle gets that long too to
    /// finish its goodbye.
    pub grpc_keepalive_interval: Duration,
    /// See `grpc_keepalive_interval`.
    pub grpc_keepalive_timeout: Duration,
    /// TLS on the gRPC listener (default: none; plaintext HTTP/2).
    pub grpc_tls: Option<TlsFiles>,
    /// TLS on the HTTP listener (default: none).
    pub http_tls: Option<TlsFiles>,
    /// How long shutdown waits for in-flight requests (default 30 s).
    pub shutdown_grace: Duration,
    /// How many keys the top-denied sketch tracks (default 256).
    pub top_denied_capacity: usize,
    /// A further check of the rules, at start-up and on every reload, for a program that
    /// cannot run every valid rule set (`weir proxy`); a rule set it refuses is a bad file
    /// (the old rules stay). Default: none.
    pub validate: Option<RuleCheck>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            rules: RuleSource::Example,
            store: StoreSpec::Memory {
                capacity: StoreSpec::DEFAULT_MEMORY_CAPACITY,
            },
            failover: FailoverConfig::default(),
            key_prefix: None,
            redis_batch_wait: None,
            redis_batch_size: StoreOptions::REDIS_BATCH_DECISIONS,
            lease: LeaseConfig::default(),
            store_clock: StoreClock::default(),
            shadow: false,
            admin_token: None,
            decision_api: true,
            headers: HeaderStyle::default(),
            envoy_headers: ResponseHeaders::NONE,
            near_limit_ratio: 0.8,
            clock: SharedClock::default(),
            reload: ReloadSettings::default(),
            ready_in_fallback: true,
            sweep_interval: Duration::from_secs(10),
            request_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            max_header_bytes: 16 * 1024,
            max_connections: Settings::DEFAULT_MAX_CONNECTIONS,
            grpc_idle_timeout: Duration::from_secs(300),
            grpc_keepalive_interval: Duration::from_secs(60),
            grpc_keepalive_timeout: Duration::from_secs(20),
            grpc_tls: None,
            http_tls: None,
            shutdown_grace: Duration::from_secs(30),
            top_denied_capacity: 256,
            validate: None,
        }
    }
}

impl Settings {
    /// The default of [`Settings::max_connections`]: 4096 per listener.
    pub const DEFAULT_MAX_CONNECTIONS: NonZeroUsize = match NonZeroUsize::new(4096) {
        Some(n) => n,
        None => NonZeroUsize::MIN,
    };

    /// Settings with rules from `path` (a file or a directory).
    pub fn with_rules(mut self, path: impl Into<PathBuf>) -> Self {
        self.rules = RuleSource::Path(path.into());
        self
    }
}
