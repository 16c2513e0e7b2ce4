//! The options that set up Weir's decision engine — rules, store, admin token, headers,
//! reload, logs — shared by `weir serve` and `weir proxy` (each also a `WEIR_*` environment
//! variable), the glue that turns them into `weir_server::Settings` (with [`Fallbacks`]
//! for what neither gave: `weir serve` fills them from envoyproxy/ratelimit's variables),
//! the runtime both run on, and the signals that stop both.

use std::future::Future;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use tokio::net::TcpListener;
use weir_config::file::{read_regular, Links};
use weir_listen::ConnectionThreads;
use weir_server::{
    AdminToken, HeaderStyle, LeaseConfig, LimitOverrides, RuleSource, Settings, StoreClock,
    StoreSpec,
};

use crate::duration::parse_duration;

/// The largest admin token file read: a token is a line, not a document.
const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

/// Which rate-limit headers to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Headers {
    /// IETF RateLimit-Policy and RateLimit
    Ietf,
    /// X-RateLimit-Limit, -Remaining and -Reset (the IETF draft's first form)
    XRatelimit,
    /// Both
    Both,
    /// None
    None,
}

/// How logs are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum LogFormat {
    /// One readable line per event
    Text,
    /// One JSON object per event
    Json,
}

/// Whose clock a network store decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ClockChoice {
    /// The store's own (Redis TIME): instances need not agree on the time
    Store,
    /// This process's clock
    Process,
}

/// Whether requests may carry limit overrides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum OverridePolicy {
    /// Take them, as envoyproxy/ratelimit does
    Allow,
    /// Refuse a request carrying one (400 / INVALID_ARGUMENT)
    Deny,
}

/// The decision engine's options.
#[derive(Debug, Args)]
pub(crate) struct EngineArgs {
    /// A rule file or a directory of *.yaml rule files (Weir's format, or
    /// envoyproxy/ratelimit's unchanged) [default: the built-in example rules,
    /// config/example.yaml for serve, config/proxy.yaml for proxy]
    #[arg(long, value_name = "PATH", env = "WEIR_CONFIG")]
    pub(crate) config: Option<PathBuf>,

    /// Where counts live [default: memory]: memory, redis://host:port[/db],
    /// rediss://host:port?ca=PATH&cert=PATH&key=PATH (TLS, each option optional: the
    /// system's roots without ca, mutual TLS with cert and key),
    /// unix:///path/redis.sock?db=N, redis+cluster://host:port,host:port,
    /// redis+sentinel://host:port,…/master, memcached://host:port
    #[arg(long, value_name = "URL", env = "WEIR_STORE")]
    store: Option<String>,

    /// Global shadow mode: count and report every denial, enforce none
    #[arg(long, env = "WEIR_SHADOW")]
    shadow: bool,

    /// Whether a request may name its own limit for a descriptor (Envoy's
    /// RateLimitOverride; "limit" in /v1/check and /json). allow, as envoyproxy/ratelimit:
    /// the request's limit replaces the configured one, counted apart, but the configured
    /// rule's block, lockout or requests_per_unit: 0 still holds, and override records hold
    /// at most 10 % of the memory store (past it, overrides for new keys get a 503). deny:
    /// a request carrying one is refused (400 / INVALID_ARGUMENT), for clients that should
    /// never choose their limits
    #[arg(long, value_enum, value_name = "POLICY", env = "WEIR_LIMIT_OVERRIDES",
          default_value_t = OverridePolicy::Allow)]
    limit_overrides: OverridePolicy,

    /// A file holding the admin API's bearer token (or set WEIR_ADMIN_TOKEN); without one
    /// the admin API is off. The same token opens the live dashboard, GET /dashboard on the
    /// HTTP port, or on weir serve --admin-listen (the page asks for it; 404 without a
    /// token)
    #[arg(long, value_name = "PATH", env = "WEIR_ADMIN_TOKEN_FILE")]
    admin_token_file: Option<PathBuf>,

    /// Rate-limit headers on /v1/check answers (Envoy's: weir serve --grpc-headers)
    #[arg(long, value_enum, value_name = "KIND", env = "WEIR_HEADERS", default_value_t = Headers::Ietf)]
    headers: Headers,

    /// How many instances at least share each limit: while the store (or its server for
    /// a key) is down each decides with its share, limit / n, n the larger of N and the
    /// instances counted in the store (each announces itself there every 10 s; /readyz
    /// shows fallback_share)
    #[arg(long, value_name = "N", env = "WEIR_INSTANCES", default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..))]
    instances: u64,

    /// The longest one store call may take before it counts as failed (the call is then
    /// decided by its rule's on_failure) [default: 500ms, above the slowest call measured
    /// beside a CPU hog on a loaded host; lower it only on a quiet host with a near store]
    #[arg(long, value_name = "DURATION", env = "WEIR_STORE_TIMEOUT", value_parser = parse_duration)]
    store_timeout: Option<Duration>,

    /// Redis: coalesce concurrent decisions into one script call, gathered for at most this
    /// long (at most 1s) [default: off; weir serve: or REDIS_PIPELINE_WINDOW]
    #[arg(long, value_name = "DURATION", env = "WEIR_REDIS_BATCH_WAIT", value_parser = parse_duration)]
    pub(crate) redis_batch_wait: Option<Duration>,

    /// Redis: the most decisions one batched call carries (with --redis-batch-wait)
    #[arg(long, value_name = "N", env = "WEIR_REDIS_BATCH_SIZE", default_value_t = 100,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    redis_batch_size: u64,

    /// After a store outage, push the usage each instance counted locally meanwhile to the
    /// store, so limits count it (as penalties, per key)
    #[arg(long, env = "WEIR_RECONCILE")]
    reconcile: bool,

    /// Leased rules (`mode: leased`): a slice lives this fraction of its rule's window
    /// (the over-admission bound grows with it)
    #[arg(long, value_name = "N", env = "WEIR_LEASE_WINDOW_FRACTION", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..))]
    lease_window_fraction: u32,

    /// Leased rules: the longest a slice lives, whatever the window
    #[arg(long, value_name = "DURATION", env = "WEIR_LEASE_MAX_TTL", default_value = "10s",
          value_parser = parse_duration)]
    lease_max_ttl: Duration,

    /// Leased rules: the most units one slice holds
    #[arg(long, value_name = "N", env = "WEIR_LEASE_MAX_SLICE", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(1..))]
    lease_max_slice: u64,

    /// Whose clock a network store decides by
    #[arg(long, value_enum, value_name = "CLOCK", env = "WEIR_STORE_CLOCK", default_value_t = ClockChoice::Store)]
    store_clock: ClockChoice,

    /// The most keys the memory store holds
    #[arg(long, value_name = "N", env = "WEIR_MEMORY_CAPACITY", default_value_t = 1 << 20)]
    memory_capacity: usize,

    /// Keep the memory store's limited, blocked and locked-out keys (not every key) across
    /// restarts in this file: read at start, written every --state-interval and at shutdown
    /// (atomically: a temporary file, then a rename). A corrupt, truncated, foreign or newer
    /// file is reported (WARN) and ignored: Weir starts fresh and the next save replaces it.
    /// Memory store only; its directory must exist and be writable by Weir's user alone
    /// (see --state-file-allow-shared-dir). A record claiming more than its rule allows is
    /// clamped: a lockout to the rule's lockout max, an admin block to 30 days
    #[arg(long, value_name = "PATH", env = "WEIR_STATE_FILE")]
    state_file: Option<PathBuf>,

    /// Accept a --state-file directory that other users may write (group- or
    /// world-writable, even with the sticky bit, or owned by another user than Weir's or
    /// root). Refused at start without it: whoever can write there can plant files or
    /// replace the state file (forging lockouts and blocks, though none longer than its
    /// rule's lockout max or 30 days). The temporary file is created exclusively, never
    /// through a link, either way
    #[arg(long, env = "WEIR_STATE_FILE_ALLOW_SHARED_DIR")]
    state_file_allow_shared_dir: bool,

    /// How often --state-file is written (besides at shutdown); a kill loses at most this
    /// much
    #[arg(long, value_name = "DURATION", env = "WEIR_STATE_INTERVAL", default_value = "30s",
          value_parser = parse_state_interval)]
    state_interval: Duration,

    /// How often the rule files are compared with what is loaded (besides the watch)
    #[arg(long, value_name = "DURATION", env = "WEIR_RELOAD_POLL", default_value = "5s",
          value_parser = parse_duration)]
    reload_poll: Duration,

    /// Do not watch the rule files with inotify (poll only)
    #[arg(long, env = "WEIR_NO_WATCH")]
    no_watch: bool,

    /// How long an HTTP client may take to send its request headers, how long an idle
    /// keep-alive connection stays open, and how long an answer may wait for the client to
    /// read any of it; then the connection is closed (slow-client protection: a client
    /// that stops reading is closed within one to two of these). A shutdown waits no
    /// longer than this for a client still sending its headers. With weir serve --resp,
    /// also how long a RESP client may take to send one whole command and to read its
    /// replies
    #[arg(long, value_name = "DURATION", env = "WEIR_HEADER_READ_TIMEOUT", default_value = "10s",
          value_parser = parse_duration)]
    header_read_timeout: Duration,

    /// How many threads serve the listeners' connections (HTTP, gRPC, RESP, the proxy's and
    /// its API's), each a single-threaded runtime of its own that keeps a connection (its
    /// requests, decisions and, for weir proxy, its upstream exchange) on one core from
    /// accept to close: auto (one per CPU this process may use), a number, or 0 for none
    /// (connections on the shared work-stealing runtime, which can spread one busy
    /// connection's HTTP/2 streams over cores, but costs a quarter more CPU a request;
    /// BENCHMARKS.md)
    #[arg(long, value_name = "N|auto", env = "WEIR_CONNECTION_THREADS", default_value = "auto",
          value_parser = parse_thread_count)]
    connection_threads: ThreadCount,

    /// What to log: a level (error, warn, info, debug, trace) or targets
    /// (e.g. weir_server=debug,info) [default: info]
    #[arg(long, value_name = "FILTER", env = "WEIR_LOG")]
    log: Option<String>,

    /// How logs are written to stderr [default: text]
    #[arg(long, value_enum, value_name = "FORMAT", env = "WEIR_LOG_FORMAT")]
    log_format: Option<LogFormat>,
}

/// `--connection-threads`: one thread per CPU, or a count (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ThreadCount {
    /// One per CPU this process may use (its affinity and cgroup quota).
    Auto,
    /// This many; 0 runs connections on the shared runtime.
    Count(usize),
}

/// The most connection threads asked for: more than any host's cores is a typo.
const MAX_CONNECTION_THREADS: usize = 1024;

fn parse_thread_count(text: &str) -> Result<ThreadCount, String> {
    if text == "auto" {
        return Ok(ThreadCount::Auto);
    }
    match text.parse::<usize>() {
        Ok(n) if n <= MAX_CONNECTION_THREADS => Ok(ThreadCount::Count(n)),
        Ok(_) => Err(format!("at most {MAX_CONNECTION_THREADS}")),
        Err(_) => Err("a number of threads, or auto".to_string()),
    }
}

impl ThreadCount {
    /// Starts the threads asked for (`None`: none).
    fn start(self) -> anyhow::Result<Option<ConnectionThreads>> {
        let count = match self {
            ThreadCount::Auto => std::thread::available_parallelism().map_or(1, NonZeroUsize::get),
            ThreadCount::Count(n) => n,
        };
        let Some(count) = NonZeroUsize::new(count) else {
            return Ok(None);
        };
        ConnectionThreads::start(count, "weir-conn")
            .map(Some)
            .context("starting the connection threads")
    }
}

/// Values for the options neither a flag nor its `WEIR_*` variable gave, before Weir's
/// defaults (`weir serve` reads them from envoyproxy/ratelimit's variables).
#[derive(Debug, Default)]
pub(crate) struct Fallbacks {
    /// The rules.
    pub(crate) rules: Option<RuleSource>,
    /// `--store`, and which variable gave it (for errors).
    pub(crate) store: Option<(String, &'static str)>,
    /// `--store-timeout`.
    pub(crate) store_timeout: Option<Duration>,
    /// `--shadow` (used only when `WEIR_SHADOW` is unset).
    pub(crate) shadow: bool,
    /// `--log`.
    pub(crate) log: Option<String>,
    /// `--log-format`.
    pub(crate) log_format: Option<LogFormat>,
}

impl EngineArgs {
    /// Starts the `--connection-threads` (`None`: none asked for). Called once the
    /// command is about to serve, not while its settings are read.
    pub(crate) fn connection_threads(&self) -> anyhow::Result<Option<ConnectionThreads>> {
        self.connection_threads.start()
    }

    /// The engine's settings (the rest at their defaults); reads the admin token.
    pub(crate) fn settings(&self) -> anyhow::Result<Settings> {
        self.settings_or(&Fallbacks::default())
    }

    /// [`EngineArgs::settings`], with `fallbacks` for the options not given.
    pub(crate) fn settings_or(&self, fallbacks: &Fallbacks) -> anyhow::Result<Settings> {
        let mut settings = Settings::default();
        if let Some(path) = &self.config {
            settings = settings.with_rules(path);
        } else if let Some(rules) = &fallbacks.rules {
            settings.engine.rules = rules.clone();
        }
        let (store, what) = match (&self.store, &fallbacks.store) {
            (Some(store), _) => (store.as_str(), "--store"),
            (None, Some((store, what))) => (store.as_str(), *what),
            (None, None) => ("memory", "--store"),
        };
        settings.engine.store = match StoreSpec::parse(store).context(what)? {
            StoreSpec::Memory { .. } => StoreSpec::Memory {
                capacity: self.memory_capacity.max(1),
            },
            other => other,
        };
        settings.engine.failover.timeout = self
            .store_timeout
            .or(fallbacks.store_timeout)
            .unwrap_or(Duration::from_millis(500));
        settings.engine.failover.instances = self.instances;
        settings.engine.failover.reconcile = self.reconcile;
        settings.engine.redis_batch_wait = self.redis_batch_wait;
        settings.engine.redis_batch_size = usize::try_from(self.redis_batch_size).unwrap_or(100);
        settings.engine.lease = LeaseConfig {
            window_fraction: self.lease_window_fraction,
            max_ttl: self.lease_max_ttl,
            max_slice: self.lease_max_slice,
            ..LeaseConfig::default()
        };
        settings.engine.store_clock = match self.store_clock {
            ClockChoice::Store => StoreClock::Store,
            ClockChoice::Process => StoreClock::Process,
        };
        settings.engine.shadow =
            self.shadow || (std::env::var_os("WEIR_SHADOW").is_none() && fallbacks.shadow);
        settings.engine.limit_overrides = match self.limit_overrides {
            OverridePolicy::Allow => LimitOverrides::Allow,
            OverridePolicy::Deny => LimitOverrides::Deny,
        };
        settings.admin_token = self.admin_token()?;
        settings.headers = match self.headers {
            Headers::Ietf => HeaderStyle {
                ietf: true,
                x_ratelimit: false,
            },
            Headers::XRatelimit => HeaderStyle {
                ietf: false,
                x_ratelimit: true,
            },
            Headers::Both => HeaderStyle {
                ietf: true,
                x_ratelimit: true,
            },
            Headers::None => HeaderStyle {
                ietf: false,
                x_ratelimit: false,
            },
        };
        settings.engine.state_file = self.state_file.clone();
        settings.engine.state_interval = self.state_interval;
        settings.engine.state_file_allow_shared_dir = self.state_file_allow_shared_dir;
        settings.engine.reload.poll = self.reload_poll;
        settings.engine.reload.watch = !self.no_watch;
        settings.header_read_timeout = self.header_read_timeout;
        Ok(settings)
    }

    /// The token from `--admin-token-file` or `WEIR_ADMIN_TOKEN` (never a flag: it would
    /// show in `ps`).
    fn admin_token(&self) -> anyhow::Result<Option<AdminToken>> {
        let from_env = std::env::var("WEIR_ADMIN_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        let text = match (&self.admin_token_file, from_env) {
            (Some(_), Some(_)) => {
                bail!("give the admin token once: --admin-token-file or WEIR_ADMIN_TOKEN, not both")
            }
            (Some(path), None) => read_regular(path, MAX_TOKEN_FILE_BYTES, Links::Follow)
                .map_err(anyhow::Error::from)
                .and_then(|bytes| Ok(String::from_utf8(bytes)?))
                .with_context(|| format!("reading the admin token from {}", path.display()))?,
            (None, Some(token)) => token,
            (None, None) => return Ok(None),
        };
        Ok(Some(AdminToken::new(&text).context("admin token")?))
    }

    /// Logs to stderr at `--log`, as `--log-format`.
    pub(crate) fn init_logs(&self) -> anyhow::Result<()> {
        self.init_logs_or(&Fallbacks::default())
    }

    /// [`EngineArgs::init_logs`], with `fallbacks` for the options not given.
    pub(crate) fn init_logs_or(&self, fallbacks: &Fallbacks) -> anyhow::Result<()> {
        use std::io::IsTerminal as _;
        use tracing_subscriber::layer::SubscriberExt as _;
        use tracing_subscriber::util::SubscriberInitExt as _;
        let log = self
            .log
            .as_deref()
            .or(fallbacks.log.as_deref())
            .unwrap_or("info");
        let filter: tracing_subscriber::filter::Targets = log
            .parse()
            .with_context(|| format!("--log {log:?}: not a level or a target list"))?;
        let fmt = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal());
        let registry = tracing_subscriber::registry().with(filter);
        let format = self
            .log_format
            .or(fallbacks.log_format)
            .unwrap_or(LogFormat::Text);
        let result = match format {
            LogFormat::Text => registry.with(fmt).try_init(),
            LogFormat::Json => registry.with(fmt.json()).try_init(),
        };
        result.context("setting up logs")
    }
}

/// Runs `main` on a multi-threaded tokio runtime (serve and proxy).
pub(crate) fn run(main: impl Future<Output = anyhow::Result<()>>) -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?
        .block_on(main)
}

/// Binds `addr`, saying which of the command's addresses (`what`) failed.
pub(crate) async fn bind(addr: SocketAddr, what: &str) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding the {what} address {addr}"))
}

/// Completes on SIGTERM or SIGINT. The handlers are installed when this is called, so
/// call it before serving: a signal that arrives before the future is first polled still
/// stops the program gracefully (draining, the final state-file save), never by the
/// signal's default action.
pub(crate) fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => tracing::info!("SIGTERM received"),
                        _ = int.recv() => tracing::info!("SIGINT received"),
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `--state-interval`: a duration of at least [`weir_engine::MIN_STATE_INTERVAL`] (the whole
/// file is written each time; `0s` would write it without pause).
fn parse_state_interval(text: &str) -> Result<Duration, String> {
    let interval = parse_duration(text).map_err(|e| e.to_string())?;
    if interval < weir_engine::MIN_STATE_INTERVAL {
        return Err(format!(
            "'{text}' is shorter than {} ms, the shortest interval between two saves",
            weir_engine::MIN_STATE_INTERVAL.as_millis()
        ));
    }
    Ok(interval)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_threads_are_auto_a_count_or_none() {
        assert_eq!(parse_thread_count("auto"), Ok(ThreadCount::Auto));
        assert_eq!(parse_thread_count("3"), Ok(ThreadCount::Count(3)));
        assert!(matches!(ThreadCount::Count(0).start(), Ok(None)));
        assert!(parse_thread_count("1025").is_err());
        assert!(parse_thread_count("-1").is_err());
        assert!(parse_thread_count("two").is_err());
        let started = ThreadCount::Count(2).start().ok().flatten();
        assert_eq!(started.map(|t| t.count()), Some(2));
    }
}
