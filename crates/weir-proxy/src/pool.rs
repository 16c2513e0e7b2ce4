//! The upstream connections: one [`Pool`] per upstream of idle HTTP/1.1 keep-alive
//! connections (hyper's `client::conn::http1`, owned), and the exchange of one request on
//! one of them.
//!
//! No connection has a task of its own. The task that serves the client's connection
//! drives the upstream connection too: it writes the request and reads the response head
//! ([`exchange`]), then the response body ([`PooledBody`]) polls the connection as the
//! client's side reads it, and hands the connection back to the pool when the body has
//! ended. So a request goes from the client's socket to the upstream's and back without
//! a wake-up of another task, and an idle connection costs nothing but its socket.
//! Nor does the task wake itself: the connection is polled with a [`Relay`] waker, so the
//! hand-overs within one poll (the request queued, the response head and the body's chunks
//! passed back) are polled for at once, not sent through tokio's scheduler as a yield
//! (which unparked the other worker: three futex calls a request at one connection).
//!
//! An idle connection is polled once when it is taken: one the upstream closed meanwhile
//! (its FIN already read by the reactor) is dropped then, never handed out. One closed
//! after that, before the request was written, gives the request back and it is sent on
//! a new connection. One that fails after the request was written is the upstream's failure
//! (a `502`), except for the keep-alive race: a connection idle for [`STALE_AFTER`] or
//! more may have been closed by the upstream's idle timer just as the request went, so an
//! idempotent request without a body (`GET`, `HEAD`, `OPTIONS`, `PUT`, `DELETE`, `TRACE`)
//! sent on one is kept and sent once more on a new connection, as nginx does with its
//! cached connections. The pool keeps at most [`MAX_IDLE`] idle connections per upstream
//! and thread, each for at most [`IDLE_TIMEOUT`].
//!
//! Each thread takes and returns connections on an idle list of its own (sharded by
//! thread, as the engine's histograms are: `weir_engine::thread_shard`). On connection
//! threads (`--connection-threads`) a connection's socket is watched by the reactor of the
//! thread that dialled it: taken by another thread, each of its readiness events would
//! have to wake that thread first. So a thread takes only the idle connections of its own
//! list, and no lock or cache line of the pool is shared between the threads on a
//! request's path (as long as each thread has a shard of its own: there are twice as many
//! shards as cores; two threads that share one still get correct, only slower, reuse).
//!
//! This file is the pool: checking connections out and in, dialling new ones.
//! `pool/conn.rs` is one connection and its waker; `pool/exchange.rs` one request on one.

mod conn;
mod deadline;
mod exchange;

pub(crate) use exchange::{exchange, PooledBody};

use std::io;
use std::sync::Mutex;
use std::task::Context;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use weir_core::{Clock, SystemClock};
use weir_engine::thread_shard;

use crate::body::Outbound;
use crate::upstream::Upstream;

use conn::Conn;

/// The most idle connections kept per upstream and thread; one more is closed.
pub(crate) const MAX_IDLE: usize = 256;

/// The longest a connection is kept idle.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Idle this long, a connection may be closed by the upstream as the next request goes
/// (Node's and Apache's keep-alive timeouts are 5 s): an idempotent request without a
/// body sent on it is kept, to be sent once more on a new connection if it fails. Busier
/// connections cost no copy.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(1);

/// Why an exchange failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ExchangeError {
    /// The upstream could not be connected to.
    #[error("connect: {0}")]
    Connect(io::Error),
    /// The connection failed before a response head came.
    #[error("{0}")]
    Http(hyper::Error),
    /// A new connection closed before the request could be sent.
    #[error("the connection closed before the request was sent")]
    Closed,
    /// No response head before the request's deadline (the upstream timeout).
    #[error("no response before the upstream timeout")]
    TimedOut,
}

impl ExchangeError {
    /// Whether the upstream could not be reached at all.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, Self::Connect(_))
    }
}

/// One thread's idle connections, on a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Idle(Mutex<Vec<Conn>>);

/// The idle connections to one upstream.
#[derive(Debug)]
pub(crate) struct Pool {
    upstream: Upstream,
    /// One list per thread shard ([`Pool::idle`]).
    idle: Box<[Idle]>,
    max_idle: usize,
    connect_timeout: Duration,
    /// [`STALE_AFTER`], but for tests.
    stale_after: Duration,
    clock: SystemClock,
}

impl Pool {
    /// An empty pool for `upstream`, connecting within `connect_timeout`.
    pub(crate) fn new(upstream: Upstream, connect_timeout: Duration) -> Self {
        Self::bounded(upstream, connect_timeout, MAX_IDLE)
    }

    /// [`Pool::new`] keeping at most `max_idle` idle connections.
    pub(crate) fn bounded(upstream: Upstream, connect_timeout: Duration, max_idle: usize) -> Self {
        Self {
            upstream,
            idle: (0..thread_shard::shard_count())
                .map(|_| Idle::default())
                .collect(),
            max_idle,
            connect_timeout,
            stale_after: STALE_AFTER,
            clock: SystemClock::new(),
        }
    }

    /// Counts every idle connection as stale after `after` (tests).
    #[cfg(test)]
    fn stale_after(mut self, after: Duration) -> Self {
        self.stale_after = after;
        self
    }

    /// Whether `conn`, taken from the pool, was idle long enough that the upstream may
    /// have closed it as a request goes.
    fn stale(&self, conn: &Conn) -> bool {
        let idle_ns = self.clock.now_ns().saturating_sub(conn.idle_since_ns);
        u128::from(idle_ns) >= self.stale_after.as_nanos()
    }

    /// The deadline `timeout` from now, on the pool's clock (for [`exchange`]).
    pub(crate) fn due_in(&self, timeout: Duration) -> u64 {
        let timeout_ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        self.clock.now_ns().saturating_add(timeout_ns)
    }

    /// The upstream.
    pub(crate) fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// This thread's idle connections (`None` only for a pool without lists, which
    /// [`Pool::bounded`] never builds).
    fn idle(&self) -> Option<&Mutex<Vec<Conn>>> {
        let shard = thread_shard::this_thread(self.idle.len());
        self.idle.get(shard).map(|idle| &idle.0)
    }

    /// How many connections are idle, on every thread.
    #[cfg(test)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle
            .iter()
            .map(|idle| idle.0.lock().map_or(0, |idle| idle.len()))
            .sum()
    }

    /// Whether `conn` has been idle too long.
    fn expired(&self, conn: &Conn) -> bool {
        let idle_ns = self.clock.now_ns().saturating_sub(conn.idle_since_ns);
        u128::from(idle_ns) > IDLE_TIMEOUT.as_nanos()
    }

    /// The most recently used idle connection still open (closed and expired ones are
    /// dropped on the way).
    fn take(&self, cx: &mut Context<'_>) -> Option<Conn> {
        loop {
            let mut conn = {
                let mut idle = self.idle()?.lock().ok()?;
                let conn = idle.pop()?;
                if self.expired(&conn) {
                    // The rest are older still.
                    let stale = std::mem::take(&mut *idle);
                    drop(idle);
                    drop(stale);
                    return None;
                }
                conn
            };
            if conn.usable(cx) {
                return Some(conn);
            }
        }
    }

    /// Back to the pool, if it is still open and there is room; closed otherwise.
    fn put(&self, mut conn: Conn) {
        if conn.io.closed || conn.io.sender.is_closed() {
            return;
        }
        // Idle: no task waits on it.
        conn.relay.set_task(None);
        conn.idle_since_ns = self.clock.now_ns();
        let Some(Ok(mut idle)) = self.idle().map(Mutex::lock) else {
            return;
        };
        if idle.first().is_some_and(|oldest| self.expired(oldest)) {
            idle.retain(|c| !self.expired(c));
        }
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }

    /// A new connection (no request on it yet), connected within `within`.
    async fn connect(&self, within: Duration) -> Result<Conn, ExchangeError> {
        let stream = self.dial(within).await?;
        let (sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(ExchangeError::Http)?;
        Ok(Conn::new(sender, connection))
    }

    /// Sends `request` (a protocol upgrade) on a new connection of its own, which can be
    /// upgraded and is never pooled, and waits for the response head. A task of its own
    /// drives the connection until it closes or its socket is handed to the upgrade
    /// (`hyper::upgrade::on` on the response: `tunnel.rs`).
    pub(crate) async fn open_upgrade(
        &self,
        request: Request<Outbound>,
    ) -> Result<Response<Incoming>, ExchangeError> {
        let stream = self.dial(self.connect_timeout).await?;
        let (mut sender, connection) = http1::Builder::new()
            .handshake(TokioIo::new(stream))
            .await
            .map_err(ExchangeError::Http)?;
        tokio::spawn(async move {
            let _ = connection.with_upgrades().await;
        });
        sender
            .send_request(request)
            .await
            .map_err(ExchangeError::Http)
    }

    /// A TCP connection to the upstream, within `within`.
    async fn dial(&self, within: Duration) -> Result<TcpStream, ExchangeError> {
        let authority = self.upstream.authority();
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let port = authority.port_u16().unwrap_or(80);
        let stream = match tokio::time::timeout(within, TcpStream::connect((host, port))).await {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => return Err(ExchangeError::Connect(e)),
            Err(_) => {
                return Err(ExchangeError::Connect(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connect timed out",
                )))
            }
        };
        stream.set_nodelay(true).map_err(ExchangeError::Connect)?;
        Ok(stream)
    }
}
