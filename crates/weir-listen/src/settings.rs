//! What every Weir program's listeners can be told, with the documented defaults: the
//! engine's settings (rules, store, clock, …: [`EngineSettings`]) and the listeners' own
//! (limits, timers, TLS, headers, the admin token). `weir serve` adds its gRPC and decision
//! options around these (`weir_server::Settings`); `weir proxy` uses them as they are for
//! its API listener. The CLI fills this from flags and `WEIR_*` variables; tests build it
//! directly (and inject a `ManualClock` into `engine.clock`).

use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::time::Duration;

use weir_engine::EngineSettings;

use weir_names::HeaderStyle;

use crate::admin_token::AdminToken;
use crate::threads::ConnectionThreads;
use crate::tls::TlsFiles;

/// Settings of one program's listeners and the engine behind them.
///
/// ```
/// use std::time::Duration;
/// use weir_listen::Settings;
///
/// let mut settings = Settings::default(); // example rules, memory store
/// settings.engine.shadow = true;
/// settings.request_timeout = Duration::from_secs(2);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// The engine: rules, store, clock, shadow mode, reload.
    pub engine: EngineSettings,
    /// The admin API's token; `None` disables the admin API (its routes answer 404).
    pub admin_token: Option<AdminToken>,
    /// Which rate-limit headers answers carry (`weir serve`'s `/v1/check`, `weir proxy`'s
    /// responses; default: the IETF ones).
    pub headers: HeaderStyle,
    /// The longest one HTTP or gRPC request may take (default 5 s).
    pub request_timeout: Duration,
    /// How long an HTTP client may take to send a request's headers, how long an idle
    /// keep-alive connection stays open, and how long an answer may wait for the client to
    /// read any of it (default 10 s); then the connection is closed.
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
    /// TLS on the HTTP listener (default: none).
    pub http_tls: Option<TlsFiles>,
    /// How long shutdown waits for in-flight requests (default 30 s).
    pub shutdown_grace: Duration,
    /// Listeners the caller serves beside HTTP and gRPC, each with its own
    /// `max_connections` (`weir serve --resp`: 1; default 0): counted in the start-up
    /// warning about the open-files limit.
    pub other_listeners: usize,
    /// Threads that run the listeners' connections, each a runtime of its own (default:
    /// none, connections run on the caller's runtime). `weir serve` and `weir proxy` start
    /// one per CPU (`--connection-threads`): see [`ConnectionThreads`].
    pub connection_threads: Option<ConnectionThreads>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            engine: EngineSettings::default(),
            admin_token: None,
            headers: HeaderStyle::default(),
            request_timeout: Duration::from_secs(5),
            header_read_timeout: Duration::from_secs(10),
            max_body_bytes: 64 * 1024,
            max_header_bytes: 16 * 1024,
            max_connections: Settings::DEFAULT_MAX_CONNECTIONS,
            http_tls: None,
            shutdown_grace: Duration::from_secs(30),
            other_listeners: 0,
            connection_threads: None,
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
        self.engine = self.engine.with_rules(path);
        self
    }
}
