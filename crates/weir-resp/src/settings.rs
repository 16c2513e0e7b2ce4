//! [`Settings`]: the front end's bounds and its protection. Every bound caps what a client
//! can make the server hold or wait for; the password and TLS decide who may send commands
//! at all; the longest window caps what one `CL.THROTTLE` / `THROTTLE` may do to a key.
//! None changes how a decision is made (the engine's settings do: shadow mode, rules,
//! store).

use std::time::Duration;

use weir_listen::AdminToken;

/// How the RESP front end bounds and admits its clients.
///
/// ```
/// use std::time::Duration;
/// let settings = weir_resp::Settings::default()
///     .max_connections(1000)
///     .idle_timeout(Duration::from_secs(60));
/// assert_eq!(settings.connections(), 1000);
/// ```
#[derive(Clone)]
pub struct Settings {
    pub(crate) max_connections: usize,
    pub(crate) max_args: usize,
    pub(crate) max_bulk_bytes: usize,
    pub(crate) max_request_bytes: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) command_timeout: Duration,
    pub(crate) write_timeout: Duration,
    pub(crate) request_timeout: Duration,
    pub(crate) shutdown_grace: Duration,
    pub(crate) max_window: Duration,
    pub(crate) password: Option<AdminToken>,
    pub(crate) tls: Option<weir_listen::Tls>,
    pub(crate) threads: Option<weir_listen::ConnectionThreads>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("max_connections", &self.max_connections)
            .field("max_args", &self.max_args)
            .field("max_bulk_bytes", &self.max_bulk_bytes)
            .field("max_request_bytes", &self.max_request_bytes)
            .field("idle_timeout", &self.idle_timeout)
            .field("command_timeout", &self.command_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("max_window", &self.max_window)
            .field("password", &self.password)
            .field("tls", &self.tls.is_some())
            .field("threads", &self.threads.as_ref().map(|t| t.count()))
            .finish()
    }
}

impl Default for Settings {
    /// 4096 connections, 1024 arguments of at most 16 KiB and 64 KiB per command (what
    /// `weir serve` allows a request body), a command sent whole within 10 s of its first
    /// byte, idle connections closed after 5 minutes, replies a client does not read
    /// within 10 s close its connection, each decision bounded by 5 seconds, shutdown
    /// waiting at most 30 s for connections, keys held at most a day by one `CL.THROTTLE`
    /// / `THROTTLE`, no password, no TLS. A connection holds at most about one command,
    /// one read (16 KiB) and 64 KiB of replies (a transaction: at most 1 MiB queued), so
    /// 4096 of them stay bounded whatever clients send.
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_args: 1024,
            max_bulk_bytes: 16 * 1024,
            max_request_bytes: 64 * 1024,
            idle_timeout: Duration::from_secs(300),
            command_timeout: Duration::from_secs(10),
            write_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(30),
            max_window: Duration::from_secs(86_400),
            password: None,
            tls: None,
            threads: None,
        }
    }
}

impl Settings {
    /// Connections open at once (at least 1); one past it is told
    /// `-ERR max number of clients reached` and closed, as Redis does.
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Arguments per command, its name included (at least 1); more is a protocol error.
    pub fn max_args(mut self, n: usize) -> Self {
        self.max_args = n.max(1);
        self
    }

    /// Bytes per argument; a longer one is a protocol error before it is read.
    pub fn max_bulk_bytes(mut self, n: usize) -> Self {
        self.max_bulk_bytes = n;
        self
    }

    /// Bytes of one command's arguments together; more is a protocol error.
    pub fn max_request_bytes(mut self, n: usize) -> Self {
        self.max_request_bytes = n;
        self
    }

    /// How long a connection may send nothing between two commands before it is closed.
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }

    /// How long a client has to send a whole command once its first byte arrived; then the
    /// connection is closed. A deadline, not an idle timer: trickling bytes does not move
    /// it (the RESP form of `weir serve`'s header read timeout).
    pub fn command_timeout(mut self, d: Duration) -> Self {
        self.command_timeout = d;
        self
    }

    /// How long writing replies may wait on a client that does not read them before its
    /// connection is closed.
    pub fn write_timeout(mut self, d: Duration) -> Self {
        self.write_timeout = d;
        self
    }

    /// How long one decision may wait on the store before it is answered with an error.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// How long shutdown waits for open connections to finish their command and close;
    /// past it they are dropped.
    pub fn shutdown_grace(mut self, d: Duration) -> Self {
        self.shutdown_grace = d;
        self
    }

    /// The longest one `CL.THROTTLE` or `THROTTLE` may hold a key: its window, the emission
    /// interval (`period / count`) times the burst it allows, and so the longest lockout a
    /// caller can set. Longer parameters are refused with an error (default: a day;
    /// `weir serve --resp-max-window`). At most 10 years (Weir's `MAX_SPAN`) in any case.
    pub fn max_window(mut self, d: Duration) -> Self {
        self.max_window = d;
        self
    }

    /// Requires `AUTH <password>` (or `AUTH default <password>`, `HELLO … AUTH default
    /// <password>`) before any command but `AUTH`, `HELLO`, `PING` and `QUIT`, which
    /// answer `-NOAUTH Authentication required.` until then. Compared in constant time,
    /// never printed (`Debug` is redacted).
    pub fn password(mut self, password: AdminToken) -> Self {
        self.password = Some(password);
        self
    }

    /// Runs each connection on one of `threads` from accept to close (`weir serve
    /// --connection-threads`), not on the runtime that accepts.
    pub fn connection_threads(mut self, threads: weir_listen::ConnectionThreads) -> Self {
        self.threads = Some(threads);
        self
    }

    /// Serves RESP over TLS (mutual TLS if the acceptor asks clients for certificates):
    /// build it with `weir_listen::Tls::new(weir_listen::tls_acceptor(…)?, "RESP", clock)`,
    /// as the other listeners do (refused handshakes are counted and logged as theirs).
    pub fn tls(mut self, tls: weir_listen::Tls) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The connection cap in force.
    pub fn connections(&self) -> usize {
        self.max_connections
    }
}
