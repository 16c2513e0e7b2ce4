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
//! cached connections. The pool keeps at most [`MAX_IDLE`] idle connections per upstream,
//! each for at most [`IDLE_TIMEOUT`].

use std::future::{poll_fn, Future as _};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use weir_core::{Clock, SystemClock};

use crate::body::Outbound;
use crate::upstream::Upstream;

/// The most idle connections kept per upstream; one more is closed.
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
}

impl ExchangeError {
    /// Whether the upstream could not be reached at all.
    pub(crate) fn is_connect(&self) -> bool {
        matches!(self, Self::Connect(_))
    }
}

/// One upstream connection: the request half and the connection itself, driven by whoever
/// holds it, always through its [`Relay`].
struct Conn {
    /// Boxed once per connection, so that a response body holding its connection stays
    /// small (hyper's connection state is most of a kilobyte) and is moved cheaply.
    io: Box<ConnIo>,
    relay: Arc<Relay>,
    /// The relay as a waker (made once per connection).
    waker: Waker,
    /// Idle in the pool since (the clock's nanoseconds).
    idle_since_ns: u64,
}

/// What a connection's polls touch.
struct ConnIo {
    sender: SendRequest<Outbound>,
    connection: Connection<TokioIo<TcpStream>, Outbound>,
    /// The connection's future has finished: it is closed, never to be used again.
    closed: bool,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("closed", &self.io.closed)
            .finish_non_exhaustive()
    }
}

impl ConnIo {
    /// Drives the connection (writes what is queued, reads what came); `true` once it is
    /// closed.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.closed && Pin::new(&mut self.connection).poll(cx).is_ready() {
            self.closed = true;
        }
        self.closed
    }
}

/// The most times [`Conn::poll_with`] polls again at once because the poll itself woke
/// the connection; past it the wake goes to the task (a yield).
const SELF_WAKES: usize = 8;

impl Conn {
    fn new(
        sender: SendRequest<Outbound>,
        connection: Connection<TokioIo<TcpStream>, Outbound>,
    ) -> Self {
        let relay = Arc::new(Relay::default());
        Self {
            io: Box::new(ConnIo {
                sender,
                connection,
                closed: false,
            }),
            waker: Waker::from(Arc::clone(&relay)),
            relay,
            idle_since_ns: 0,
        }
    }

    /// Polls `f` (which drives the connection, or a future or a body of it) with the
    /// connection's relay as the waker: a wake-up that `f` itself causes (the connection
    /// handing the response head or a body chunk to this very task, or the body asking the
    /// connection for more) makes `f` run again at once instead of waking the task, which
    /// tokio would count as a yield (the task to the back of the queue and another worker
    /// unparked to steal it). Wake-ups from elsewhere (the socket) go to the task.
    fn poll_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(&mut ConnIo, &mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.relay.set_task(Some(cx.waker()));
        let mut relayed = Context::from_waker(&self.waker);
        let mut rounds = 0;
        loop {
            self.relay.begin();
            let poll = f(&mut self.io, &mut relayed);
            if !self.relay.end() {
                return poll;
            }
            rounds += 1;
            // Woken by itself: a ready answer is taken up by the caller (who polls the
            // body, which drives the connection), a pending one is polled again.
            if poll.is_ready() {
                return poll;
            }
            if rounds >= SELF_WAKES {
                cx.waker().wake_by_ref();
                return poll;
            }
        }
    }

    /// Runs `f` on the connection with its wake-ups held back: for what the caller polls
    /// right after.
    fn quietly<T>(&mut self, f: impl FnOnce(&mut ConnIo) -> T) -> T {
        self.relay.begin();
        let value = f(&mut self.io);
        let _ = self.relay.end();
        value
    }

    /// Drives the connection; `true` once it is closed.
    fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        let _ = self.poll_with(cx, |io, cx| {
            io.drive(cx);
            Poll::<()>::Pending
        });
        self.io.closed
    }

    /// Whether it can take another request (driven once first, so a close already read is
    /// seen).
    fn usable(&mut self, cx: &mut Context<'_>) -> bool {
        !self.drive(cx) && !self.io.sender.is_closed()
    }
}

/// The waker a connection is polled with: a wake-up during [`Conn::poll_with`] is noted
/// and polled for there; any other goes to the task that last polled the connection (none
/// while it is idle in the pool: nothing waits on it then).
#[derive(Debug, Default)]
struct Relay {
    task: Mutex<Option<Waker>>,
    polling: AtomicBool,
    woken: AtomicBool,
}

impl Relay {
    /// The task woken from now on (`None`: no one).
    fn set_task(&self, waker: Option<&Waker>) {
        if let Ok(mut task) = self.task.lock() {
            match (waker, &mut *task) {
                (Some(new), Some(old)) if old.will_wake(new) => {}
                (new, task) => *task = new.cloned(),
            }
        }
    }

    fn begin(&self) {
        self.woken.store(false, Ordering::SeqCst);
        self.polling.store(true, Ordering::SeqCst);
    }

    /// Whether a wake-up came during the poll.
    fn end(&self) -> bool {
        self.polling.store(false, Ordering::SeqCst);
        self.woken.swap(false, Ordering::SeqCst)
    }
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted first: a poll that ends after this sees it (and polls again).
        self.woken.store(true, Ordering::SeqCst);
        if self.polling.load(Ordering::SeqCst) {
            return;
        }
        let task = self.task.lock().ok().and_then(|task| task.clone());
        if let Some(task) = task {
            task.wake();
        }
    }
}

/// The idle connections to one upstream.
#[derive(Debug)]
pub(crate) struct Pool {
    upstream: Upstream,
    idle: Mutex<Vec<Conn>>,
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
            idle: Mutex::new(Vec::new()),
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

    /// The upstream.
    pub(crate) fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    /// How many connections are idle.
    #[cfg(test)]
    pub(crate) fn idle_count(&self) -> usize {
        self.idle.lock().map_or(0, |idle| idle.len())
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
                let mut idle = self.idle.lock().ok()?;
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
        let Ok(mut idle) = self.idle.lock() else {
            return;
        };
        if idle.first().is_some_and(|oldest| self.expired(oldest)) {
            idle.retain(|c| !self.expired(c));
        }
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }

    /// A new connection (no request on it yet).
    async fn connect(&self) -> Result<Conn, ExchangeError> {
        let stream = self.dial().await?;
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
        let stream = self.dial().await?;
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

    /// A TCP connection to the upstream, within the connect timeout.
    async fn dial(&self) -> Result<TcpStream, ExchangeError> {
        let authority = self.upstream.authority();
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        let port = authority.port_u16().unwrap_or(80);
        let stream = match tokio::time::timeout(
            self.connect_timeout,
            TcpStream::connect((host, port)),
        )
        .await
        {
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

/// Sends `request` to `pool`'s upstream on an idle connection or a new one, and waits for
/// the response head. When a reused connection turns out closed before the request was
/// written, the request goes out once more, on a new connection.
pub(crate) async fn exchange(
    pool: &Arc<Pool>,
    request: Request<Outbound>,
) -> Result<Response<PooledBody>, ExchangeError> {
    let mut request = request;
    let mut idle = poll_fn(|cx| Poll::Ready(pool.take(cx))).await;
    // The copy of a request sent on a stale connection, to send once more.
    let mut spare = None;
    loop {
        let reused = idle.is_some();
        let mut conn = match idle.take() {
            Some(conn) => conn,
            None => pool.connect().await?,
        };
        if reused && spare.is_none() && pool.stale(&conn) {
            spare = resendable(&request);
        }
        // Ready for a request (the connection driven meanwhile: it is ours alone).
        let ready = poll_fn(|cx| {
            conn.poll_with(cx, |io, cx| {
                if io.drive(cx) {
                    return Poll::Ready(Err(None));
                }
                io.sender.poll_ready(cx).map_err(Some)
            })
        })
        .await;
        match ready {
            Ok(()) => {}
            Err(_) if reused => continue,
            Err(Some(e)) => return Err(ExchangeError::Http(e)),
            Err(None) => return Err(ExchangeError::Closed),
        }
        // Queued for the connection, which is woken by it: that wake is ours, and the poll
        // below drives the connection anyway.
        let sent = conn.quietly(|io| io.sender.try_send_request(request));
        let mut sent = std::pin::pin!(sent);
        let answer = poll_fn(|cx| {
            conn.poll_with(cx, |io, cx| {
                io.drive(cx);
                sent.as_mut().poll(cx)
            })
        })
        .await;
        match answer {
            Ok(response) => {
                return Ok(response.map(|incoming| PooledBody {
                    incoming,
                    conn: Some(conn),
                    pool: Arc::clone(pool),
                    ended: false,
                }))
            }
            Err(mut e) => match (e.take_message(), spare.take()) {
                // Never written: the reused connection closed under it; a new one.
                (Some(back), _) if reused => request = back,
                // Written on a stale connection the upstream closed: the copy, on a new one.
                (_, Some(copy)) if reused => {
                    tracing::debug!(upstream = %pool.upstream, error = %e.error(), "a stale keep-alive connection failed; the request goes once more on a new one");
                    request = copy;
                }
                _ => return Err(ExchangeError::Http(e.into_error())),
            },
        }
    }
}

/// A copy of `request` to send again if the connection fails after writing it: only an
/// idempotent request (RFC 9110 §9.2.2) without a body, which the upstream may have
/// received without harm.
fn resendable(request: &Request<Outbound>) -> Option<Request<Outbound>> {
    if !request.method().is_idempotent() || !matches!(request.body(), Outbound::Empty) {
        return None;
    }
    let mut copy = Request::new(Outbound::Empty);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    Some(copy)
}

/// The upstream's response body, driving its connection as it is read and handing the
/// connection back to the pool once it has ended.
#[derive(Debug)]
pub(crate) struct PooledBody {
    incoming: Incoming,
    conn: Option<Conn>,
    pool: Arc<Pool>,
    ended: bool,
}

impl PooledBody {
    fn release(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.pool.put(conn);
        }
    }
}

impl hyper::body::Body for PooledBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        let incoming = &mut this.incoming;
        let frame = match &mut this.conn {
            Some(conn) => conn.poll_with(cx, |io, cx| {
                io.drive(cx);
                let frame = Pin::new(&mut *incoming).poll_frame(cx);
                if let Poll::Ready(None) = frame {
                    // Once more: the connection takes the body's end and is ready again
                    // (or closes, when the upstream said so).
                    io.drive(cx);
                }
                frame
            }),
            None => Pin::new(incoming).poll_frame(cx),
        };
        match &frame {
            Poll::Ready(None) => {
                this.ended = true;
                this.release();
            }
            Poll::Ready(Some(Err(_))) => {
                // Never reused.
                this.conn = None;
            }
            _ => {}
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.ended || hyper::body::Body::is_end_stream(&self.incoming)
    }

    fn size_hint(&self) -> SizeHint {
        hyper::body::Body::size_hint(&self.incoming)
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        // A body the client's side did not need to read (empty: a HEAD, a 204, a
        // `Content-Length: 0`) ends here; one dropped part-read closes its connection.
        if self.ended || hyper::body::Body::is_end_stream(&self.incoming) {
            self.release();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests state expectations by panicking

    use std::net::SocketAddr;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use http_body_util::BodyExt as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;

    /// What the raw upstream does on each connection.
    #[derive(Clone, Copy, PartialEq)]
    enum Upstreaming {
        /// Answers every request, keep-alive.
        KeepAlive,
        /// Answers one request, then closes (no `Connection: close`: an idle close).
        CloseAfterOne,
        /// Answers one request with `Connection: close`, then closes.
        SaysClose,
        /// Reads the request, then closes without an answer.
        NeverAnswers,
        /// Answers the first request, keep-alive; reads the second, then closes without an
        /// answer (an idle timer that fired as the request came).
        SwallowsTheSecond,
    }

    /// A raw HTTP/1.1 upstream (GET only) counting the connections it accepted.
    async fn upstream(mode: Upstreaming) -> (Upstream, Arc<AtomicUsize>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&accepted);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    let mut served = 0;
                    loop {
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match socket.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.clear();
                        served += 1;
                        let answer: &[u8] = match mode {
                            Upstreaming::NeverAnswers => return,
                            Upstreaming::SwallowsTheSecond if served == 2 => return,
                            Upstreaming::SaysClose => {
                                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                            }
                            _ => b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
                        };
                        if socket.write_all(answer).await.is_err() {
                            return;
                        }
                        if !matches!(
                            mode,
                            Upstreaming::KeepAlive | Upstreaming::SwallowsTheSecond
                        ) {
                            return;
                        }
                    }
                });
            }
        });
        (format!("http://{addr}").parse().unwrap(), accepted)
    }

    fn get() -> Request<Outbound> {
        Request::get("/")
            .header(http::header::HOST, "test")
            .body(Outbound::Empty)
            .unwrap()
    }

    /// One request through `pool`, its body read to the end.
    async fn round(pool: &Arc<Pool>) -> Result<String, ExchangeError> {
        let response = exchange(pool, get()).await?;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Ok(String::from_utf8(body.to_vec()).unwrap())
    }

    /// Counts the wake-ups it gets.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_relay_keeps_a_polls_own_wake_ups_and_passes_on_the_others() {
        let task = Arc::new(Counting::default());
        let task_waker = Waker::from(Arc::clone(&task));
        let relay = Arc::new(Relay::default());
        let relayed = Waker::from(Arc::clone(&relay));
        relay.set_task(Some(&task_waker));
        // During a poll: noted, not passed on.
        relay.begin();
        relayed.wake_by_ref();
        assert!(relay.end(), "the poll learns of its own wake-up");
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        // Outside one (the socket became ready): the task is woken.
        relayed.wake_by_ref();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        relay.begin();
        assert!(!relay.end(), "a wake-up before the poll is not the poll's");
        // Idle in the pool: no one to wake.
        relay.set_task(None);
        relayed.wake_by_ref();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_keep_alive_connection_is_reused() {
        let (up, accepted) = upstream(Upstreaming::KeepAlive).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        for _ in 0..5 {
            assert_eq!(round(&pool).await.unwrap(), "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        assert_eq!(pool.idle_count(), 1);
    }

    #[tokio::test]
    async fn a_connection_the_upstream_closed_while_idle_is_not_handed_out() {
        let (up, accepted) = upstream(Upstreaming::CloseAfterOne).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        for round_no in 1..=3 {
            assert_eq!(round(&pool).await.unwrap(), "ok");
            // The upstream's FIN arrives while the connection is idle.
            tokio::time::sleep(Duration::from_millis(50)).await;
            assert_eq!(accepted.load(Ordering::SeqCst), round_no);
        }
    }

    #[tokio::test]
    async fn back_to_back_requests_on_connections_the_upstream_closes_all_succeed() {
        let (up, accepted) = upstream(Upstreaming::CloseAfterOne).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        // Back to back: the close may not be seen before the request goes (then it comes
        // back unwritten and goes on a new connection) or is (then a new one at once).
        for _ in 0..20 {
            assert_eq!(round(&pool).await.unwrap(), "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 20);
    }

    #[tokio::test]
    async fn connection_close_is_not_pooled() {
        let (up, accepted) = upstream(Upstreaming::SaysClose).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        assert_eq!(round(&pool).await.unwrap(), "ok");
        assert_eq!(pool.idle_count(), 0);
        assert_eq!(round(&pool).await.unwrap(), "ok");
        assert_eq!(accepted.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_close_after_the_request_is_the_upstreams_failure_not_a_connect_error() {
        let (up, _) = upstream(Upstreaming::NeverAnswers).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        let e = round(&pool).await.unwrap_err();
        assert!(!e.is_connect(), "{e}");
        assert_eq!(pool.idle_count(), 0);
    }

    /// The keep-alive race: a stale connection that the upstream closes once the request is
    /// written. An idempotent request without a body goes once more on a new connection; a
    /// `POST` is the upstream's failure; on a connection that is not stale, so is a `GET`.
    #[tokio::test]
    async fn an_idempotent_request_on_a_stale_connection_the_upstream_closed_is_sent_again() {
        let (up, accepted) = upstream(Upstreaming::SwallowsTheSecond).await;
        let pool =
            Arc::new(Pool::new(up.clone(), Duration::from_secs(1)).stale_after(Duration::ZERO));
        assert_eq!(round(&pool).await.unwrap(), "ok");
        assert_eq!(
            round(&pool).await.unwrap(),
            "ok",
            "sent again on a new connection"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);

        // The same race with a POST (pooled again after the third connection's answer).
        let post = Request::post("/")
            .header(http::header::HOST, "test")
            .body(Outbound::Empty)
            .unwrap();
        assert!(
            exchange(&pool, post).await.is_err(),
            "a POST is not sent twice"
        );
        assert_eq!(accepted.load(Ordering::SeqCst), 2);

        // Not stale: the upstream's failure, not sent again.
        let (up, accepted) = upstream(Upstreaming::SwallowsTheSecond).await;
        let fresh = Arc::new(Pool::new(up, Duration::from_secs(1)).stale_after(IDLE_TIMEOUT));
        assert_eq!(round(&fresh).await.unwrap(), "ok");
        assert!(round(&fresh).await.is_err());
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_unreachable_upstream_is_a_connect_error() {
        let dead = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let pool = Arc::new(Pool::new(
            format!("http://{dead}").parse().unwrap(),
            Duration::from_secs(1),
        ));
        assert!(round(&pool).await.unwrap_err().is_connect());
    }

    #[tokio::test]
    async fn the_pool_keeps_at_most_its_bound_and_drops_part_read_connections() {
        let (up, accepted) = upstream(Upstreaming::KeepAlive).await;
        let pool = Arc::new(Pool::bounded(up, Duration::from_secs(1), 2));
        // Three at once: three connections.
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(exchange(&pool, get()).await.unwrap());
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        for response in held {
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "ok");
        }
        assert_eq!(pool.idle_count(), 2, "the third was closed");
        // A body dropped before its end takes its connection with it.
        let unread = exchange(&pool, get()).await.unwrap();
        assert_eq!(pool.idle_count(), 1);
        drop(unread);
        assert_eq!(pool.idle_count(), 1);
    }
}
