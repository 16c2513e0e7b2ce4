//! Everything `weir serve` can be told, with the documented defaults: the listeners' and
//! the engine's settings every Weir program shares ([`weir_listen::Settings`]: rules,
//! store, clock, limits, timers, HTTP TLS, headers, the admin token), and `weir serve`'s
//! own around them: the gRPC listener's timers and TLS, and the headers Envoy is asked to
//! add. The shared ones are read and set through this type as if they were its own
//! (`settings.engine`, `settings.admin_token`: `Deref`). The CLI fills this from flags and
//! `WEIR_*` variables; tests build it directly (and inject a `ManualClock` into
//! `engine.clock`).

use std::num::NonZeroUsize;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::time::Duration;

use weir_listen::TlsFiles;

use crate::headers::ResponseHeaders;

/// Settings of one server.
///
/// ```
/// use std::time::Duration;
/// use weir_server::Settings;
///
/// let mut settings = Settings::default(); // example rules, memory store
/// settings.engine.shadow = true;
/// settings.request_timeout = Duration::from_secs(2);
/// settings.grpc_idle_timeout = Duration::from_secs(60);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Settings {
    /// What every Weir program's listeners share: the engine, the HTTP listener's limits,
    /// timers and TLS, headers, the admin token (also reached through `Deref`).
    pub listen: weir_listen::Settings,
    /// Which headers Envoy is asked to add to its responses (gRPC and `/json`; default
    /// none, as envoyproxy/ratelimit: they would show rule ids to end clients).
    pub envoy_headers: ResponseHeaders,
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
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            listen: weir_listen::Settings::default(),
            envoy_headers: ResponseHeaders::NONE,
            grpc_idle_timeout: Duration::from_secs(300),
            grpc_keepalive_interval: Duration::from_secs(60),
            grpc_keepalive_timeout: Duration::from_secs(20),
            grpc_tls: None,
        }
    }
}

impl Deref for Settings {
    type Target = weir_listen::Settings;

    fn deref(&self) -> &weir_listen::Settings {
        &self.listen
    }
}

impl DerefMut for Settings {
    fn deref_mut(&mut self) -> &mut weir_listen::Settings {
        &mut self.listen
    }
}

impl Settings {
    /// The default of `max_connections`: 4096 per listener.
    pub const DEFAULT_MAX_CONNECTIONS: NonZeroUsize =
        weir_listen::Settings::DEFAULT_MAX_CONNECTIONS;

    /// Settings with rules from `path` (a file or a directory).
    pub fn with_rules(mut self, path: impl Into<PathBuf>) -> Self {
        self.listen = self.listen.with_rules(path);
        self
    }
}
