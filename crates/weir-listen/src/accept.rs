//! The accept loop both listeners run (HTTP in `http/listener.rs`, gRPC in
//! `grpc_listener.rs`, and `weir proxy`'s through the first): it accepts connections up to
//! a cap, hands each to its protocol on a task of its own, and on shutdown stops accepting
//! and waits for every connection to close gracefully. Not here: what a connection speaks
//! (hyper's HTTP/1 or HTTP/2 server, set up by the caller) and what a request means.
//!
//! - **Connection cap.** At most `max_connections` open at once; at the cap a new
//!   connection is closed as soon as it is accepted (one WARN each time the cap is reached,
//!   not one per refusal), so file descriptors stay available for the open connections,
//!   `/healthz` and the store. Closing at once, rather than leaving clients in the kernel's
//!   backlog, tells a client straight away to go elsewhere.
//! - **Where a connection runs.** On the caller's runtime, or, when the program starts
//!   [`ConnectionThreads`] (`weir serve` and `weir proxy` do), its whole life on one of
//!   them: the socket is handed over unregistered ([`Accepted`]) and opened there.
//! - **Graceful close** ([`drive`]): on shutdown, or once a connection has been idle long
//!   enough ([`Activity::idle_for`]), it is asked to close (HTTP/2: GOAWAY, the requests in
//!   flight finish; HTTP/1: after the request in flight). An idle connection that does not
//!   finish closing within a grace period is dropped.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Body as HttpBody, Incoming};
use hyper::rt::{Read, Write};
use hyper::server::conn::{http1, http2};
use hyper::service::HttpService;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{watch, Semaphore};
use weir_core::{Clock as _, SystemClock};

use crate::beside::{beside, First};
use crate::threads::ConnectionThreads;

/// Tells a connection's task that the server is stopping.
#[derive(Debug)]
pub struct Stop(watch::Receiver<bool>);

impl Stop {
    /// Completes once the server stops.
    async fn requested(&mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

/// An accepted connection's socket, to be opened ([`Accepted::open`]) in the connection's
/// own future: on the runtime that serves it, whose reactor then watches it.
#[derive(Debug)]
pub struct Accepted(Inner);

#[derive(Debug)]
enum Inner {
    /// Served on the runtime that accepted it.
    Registered(TcpStream),
    /// Handed to a connection thread: registered with its runtime when opened there.
    Moving(std::net::TcpStream),
}

impl Accepted {
    /// `stream`, to be served on one of `threads` (it leaves this runtime's reactor now,
    /// and joins the serving thread's in [`Accepted::open`]), or on the caller's runtime
    /// when `threads` is `None`. Fails only if the socket cannot leave the reactor.
    pub fn new(stream: TcpStream, threads: Option<&ConnectionThreads>) -> io::Result<Self> {
        Ok(match threads {
            Some(_) => Accepted(Inner::Moving(stream.into_std()?)),
            None => Accepted(Inner::Registered(stream)),
        })
    }

    /// The socket, registered with the current runtime (the one the connection runs on).
    /// Fails only if the runtime cannot watch one more socket.
    pub fn open(self) -> io::Result<TcpStream> {
        match self.0 {
            Inner::Registered(stream) => Ok(stream),
            Inner::Moving(stream) => TcpStream::from_std(stream),
        }
    }
}

/// Accepts connections on `listener` (the `name` is for logs) until `shutdown` completes,
/// runs `serve`'s future for each on a task of its own (on one of `threads` when given,
/// else on the caller's runtime), then waits until every one has finished (each gets a
/// [`Stop`] that fires at shutdown). The future must open its socket
/// ([`Accepted::open`]) on the runtime it runs on.
pub async fn accept_loop<F, C>(
    listener: TcpListener,
    name: &'static str,
    max_connections: Option<NonZeroUsize>,
    threads: Option<ConnectionThreads>,
    shutdown: impl Future<Output = ()>,
    mut serve: F,
) -> io::Result<()>
where
    F: FnMut(Accepted, SocketAddr, Stop) -> C,
    C: Future<Output = ()> + Send + 'static,
{
    let permits =
        max_connections.map(|max| Arc::new(Semaphore::new(max.get().min(Semaphore::MAX_PERMITS))));
    let (stop, _) = watch::channel(false);
    let mut refusals = Refusals::default();
    let mut shutdown = pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    accept_failed(&error).await;
                    continue;
                }
            },
        };
        let permit = match &permits {
            None => None,
            Some(permits) => match Arc::clone(permits).try_acquire_owned() {
                Ok(permit) => {
                    refusals.room(name, permits.available_permits(), max_connections);
                    Some(permit)
                }
                Err(_) => {
                    refusals.refused(name, max_connections);
                    tracing::debug!(listener = name, %peer, "connection closed: at the cap");
                    drop(stream);
                    continue;
                }
            },
        };
        // Small answers go out at once (as axum::serve's callers usually ask).
        let _ = stream.set_nodelay(true);
        // A connection served on another thread is watched by that thread's runtime: the
        // socket leaves this runtime's reactor here and joins the other's in `open`.
        let stream = match Accepted::new(stream, threads.as_ref()) {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer, %error, "connection dropped: it could not be handed over");
                continue;
            }
        };
        let connection = serve(stream, peer, Stop(stop.subscribe()));
        let job = async move {
            connection.await;
            drop(permit);
        };
        match &threads {
            Some(threads) => threads.spawn(job),
            None => {
                tokio::spawn(job);
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    stop.closed().await;
    Ok(())
}

/// The connections closed at the cap, logged once per time the cap is reached: a WARN when
/// it is, an INFO with the count once a tenth of the cap is free again (not on every
/// connection that closes, or a listener kept at its cap would log each one).
#[derive(Debug, Default)]
struct Refusals {
    at_cap: bool,
    count: u64,
}

impl Refusals {
    fn refused(&mut self, name: &'static str, max: Option<NonZeroUsize>) {
        self.count = self.count.saturating_add(1);
        if !self.at_cap {
            self.at_cap = true;
            tracing::warn!(
                listener = name,
                max_connections = max.map_or(0, NonZeroUsize::get),
                "connection cap reached: closing new connections until some close"
            );
        }
    }

    fn room(&mut self, name: &'static str, free: usize, max: Option<NonZeroUsize>) {
        if self.at_cap && free >= max.map_or(0, NonZeroUsize::get) / 10 {
            self.at_cap = false;
            tracing::info!(
                listener = name,
                refused = std::mem::take(&mut self.count),
                "connections below the cap again"
            );
        }
    }
}

/// An accept error is about one connection (the client went away) or about the process
/// (out of file descriptors): neither stops the server; the second waits a moment so the
/// loop does not spin while nothing can be accepted.
async fn accept_failed(error: &io::Error) {
    use io::ErrorKind::{ConnectionAborted, ConnectionRefused, ConnectionReset};
    if matches!(
        error.kind(),
        ConnectionAborted | ConnectionRefused | ConnectionReset
    ) {
        return;
    }
    tracing::warn!(%error, "accepting a connection failed; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// A served connection [`drive`] can ask to close gracefully: hyper's HTTP/1 connection,
/// which hands its socket over to a protocol upgrade (a WebSocket through `weir proxy`)
/// when its service answers `101`, and its HTTP/2 connection (gRPC). hyper-util's
/// `GracefulConnection` has no implementation for the upgradeable HTTP/1 connection.
pub trait Stoppable: Future<Output = Result<(), Self::Fault>> {
    /// Why the connection ended badly.
    type Fault: std::fmt::Display;
    /// Stops taking requests and closes once those in flight are answered.
    fn stop(self: std::pin::Pin<&mut Self>);
}

impl<I, S, B> Stoppable for http1::UpgradeableConnection<I, S>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: Read + Write + Unpin + Send + 'static,
    B: HttpBody + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Fault = hyper::Error;
    fn stop(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

impl<I, S, B, E> Stoppable for http2::Connection<I, S, E>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    I: Read + Write + Unpin + 'static,
    B: HttpBody + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    E: hyper::rt::bounds::Http2ServerConnExec<S::Future, B>,
{
    type Fault = hyper::Error;
    fn stop(self: std::pin::Pin<&mut Self>) {
        self.graceful_shutdown();
    }
}

/// Serves `connection` until it ends. On `stop` it is asked to close gracefully and
/// awaited; once `idle` completes, likewise, but dropped if it has not closed within
/// `grace` (a peer that never acknowledges the goodbye cannot keep it open). `watch` runs
/// beside the connection for its whole life, the graceful close included (HTTP/1: the
/// header-read timer's watcher, `http/head_timer.rs`, which is what closes a connection
/// still sending its head when the server stops); should it complete, it is simply not
/// polled again.
pub async fn drive<C>(
    connection: C,
    mut stop: Stop,
    watch: impl Future<Output = ()>,
    idle: impl Future<Output = ()>,
    grace: Duration,
    peer: SocketAddr,
) where
    C: Stoppable,
{
    let mut connection = pin!(connection);
    // Never completes, so that both phases below may poll it.
    let mut watch = Box::pin(async {
        watch.await;
        std::future::pending::<Infallible>().await
    });
    // The stop, the idle watch and `watch` are polled only when one of them was woken
    // (`beside.rs`): the connection's own wakes, several a request, do not touch the stop
    // channel every connection shares.
    let outside = Box::pin(async {
        tokio::select! {
            () = stop.requested() => None,
            () = idle => Some(grace),
            never = watch.as_mut() => match never {},
        }
    });
    let bound = match beside(connection.as_mut(), outside).await {
        First::Main(result) => return closed(result, peer),
        First::Side(bound) => bound,
    };
    connection.as_mut().stop();
    let closing = async {
        match beside(connection.as_mut(), watch.as_mut()).await {
            First::Main(result) => result,
            First::Side(never) => match never {},
        }
    };
    match bound {
        None => closed(closing.await, peer),
        Some(grace) => match tokio::time::timeout(grace, closing).await {
            Ok(result) => closed(result, peer),
            Err(_) => tracing::debug!(%peer, "idle connection dropped: it did not close in time"),
        },
    }
}

fn closed<E: std::fmt::Display>(result: Result<(), E>, peer: SocketAddr) {
    if let Err(error) = result {
        tracing::debug!(%peer, %error, "connection closed with an error");
    }
}

/// How busy one connection is: its requests in flight and when the last one ended. A
/// request holds an [`InFlight`] from its start until its answer is ready.
///
/// A request costs two atomic updates and a clock read: no wake-up, no timer. The idle
/// watch ([`Activity::idle_for`]) sleeps until the connection could have been idle long
/// enough and checks then, so it wakes about once per idle period whatever the traffic
/// (before, each request woke it twice and it armed a new timer each time).
#[derive(Debug)]
pub struct Activity {
    in_flight: AtomicUsize,
    /// When the last request ended (or the connection opened), on `clock`.
    last_end_ns: AtomicU64,
    clock: SystemClock,
}

impl Default for Activity {
    fn default() -> Self {
        let clock = SystemClock::new();
        Self {
            in_flight: AtomicUsize::new(0),
            last_end_ns: AtomicU64::new(clock.now_ns()),
            clock,
        }
    }
}

impl Activity {
    /// Counts a request in flight until the guard is dropped.
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    /// Completes once the connection has had no request in flight for `idle` (counted from
    /// the end of its last request, or from its opening if it has had none).
    pub async fn idle_for(&self, idle: Duration) {
        let mut wait = idle;
        loop {
            tokio::time::sleep(wait).await;
            // The count is read first: a request that ended wrote its end before it
            // counted itself out.
            if self.in_flight.load(Ordering::Acquire) > 0 {
                wait = idle;
                continue;
            }
            let last_end_ns = self.last_end_ns.load(Ordering::Acquire);
            let since = Duration::from_nanos(self.clock.now_ns().saturating_sub(last_end_ns));
            match idle.checked_sub(since) {
                Some(left) if !left.is_zero() => wait = left,
                _ => return,
            }
        }
    }
}

/// A request in flight on a connection (see [`Activity`]).
#[derive(Debug)]
pub struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        activity
            .last_end_ns
            .fetch_max(activity.clock.now_ns(), Ordering::AcqRel);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The soft limit on open files in a `/proc/self/limits` text, if it is a number.
fn open_files_soft_limit(limits: &str) -> Option<u64> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    // "Max open files  <soft>  <hard>  files"
    line.split_whitespace().nth(3)?.parse().ok()
}

/// Warns at start-up when `listeners` listeners capped at `max_connections` each could
/// open more sockets than the process may (its open-files soft limit, `ulimit -n`): idle
/// connections would then exhaust file descriptors before any cap refuses them. Linux
/// only (`/proc/self/limits`); silent where the limit is unknown or unlimited.
pub fn warn_if_files_run_short(listeners: usize, max_connections: NonZeroUsize) {
    let Some(soft) = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .as_deref()
        .and_then(open_files_soft_limit)
    else {
        return;
    };
    // Room for the rule files, the store's connections, logs and the like.
    let needed = (listeners as u64)
        .saturating_mul(max_connections.get() as u64)
        .saturating_add(64);
    if needed > soft {
        tracing::warn!(
            open_files_soft_limit = soft,
            needed,
            "the open-files limit is below what the connection caps allow: raise it \
             (ulimit -n, systemd LimitNOFILE=) or lower --max-connections, or idle \
             connections can use up file descriptors before a cap refuses them"
        );
    }
}

#[cfg(test)]
mod files_tests {
    use super::*;

    #[test]
    fn reads_the_open_files_soft_limit() {
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(open_files_soft_limit(limits), Some(1024));
        let unlimited = limits.replace("1024 ", "unlimited ");
        assert_eq!(open_files_soft_limit(&unlimited), None);
        assert_eq!(open_files_soft_limit(""), None);
    }
}
