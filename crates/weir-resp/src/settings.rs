//! [`Settings`]: the front end's bounds. Every one of them caps what a client can make the
//! server hold or wait for; none changes a decision (the engine's settings do: shadow mode,
//! rules, store).

use std::time::Duration;

/// How the RESP front end bounds its clients.
///
/// ```
/// use std::time::Duration;
/// let settings = weir_resp::Settings::default()
///     .max_connections(1000)
///     .idle_timeout(Duration::from_secs(60));
/// assert_eq!(settings.connections(), 1000);
/// ```
#[derive(Debug, Clone)]
pub struct Settings {
    pub(crate) max_connections: usize,
    pub(crate) max_args: usize,
    pub(crate) max_bulk_bytes: usize,
    pub(crate) max_request_bytes: usize,
    pub(crate) idle_timeout: Duration,
    pub(crate) request_timeout: Duration,
}

impl Default for Settings {
    /// 4096 connections, 1024 arguments of at most 16 KiB and 64 KiB per command (what
    /// `weir serve` allows a request body), idle connections closed after 5 minutes, each
    /// decision bounded by 5 seconds. A connection holds at most about one command, one
    /// read (16 KiB) and 64 KiB of replies, so 4096 of them stay under 600 MiB whatever
    /// clients send.
    fn default() -> Self {
        Self {
            max_connections: 4096,
            max_args: 1024,
            max_bulk_bytes: 16 * 1024,
            max_request_bytes: 64 * 1024,
            idle_timeout: Duration::from_secs(300),
            request_timeout: Duration::from_secs(5),
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

    /// How long a connection may send nothing before it is closed.
    pub fn idle_timeout(mut self, d: Duration) -> Self {
        self.idle_timeout = d;
        self
    }

    /// How long one decision may wait on the store before it is answered with an error.
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// The connection cap in force.
    pub fn connections(&self) -> usize {
        self.max_connections
    }
}
