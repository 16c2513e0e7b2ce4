//! The exchange of one request on one pooled connection ([`exchange`]): a connection
//! checked out of the [`Pool`] (or a new one), the request written, the response head
//! read, and the response body ([`PooledBody`]) that drives the connection as the client
//! reads it and checks it back in when it ends. `pool.rs` says when a request is sent
//! once more; `forward.rs` calls this for every proxied request.
//!
//! The upstream timeout is a deadline the exchange checks itself, on the connection's one
//! timer (`deadline.rs`), not a `tokio::time::timeout` around it: no timer is registered
//! and removed a request.

use std::future::{poll_fn, Future as _};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use std::pin::Pin;
use weir_core::Clock;

use crate::body::Outbound;

use super::conn::{Conn, ConnIo};
use super::{ExchangeError, Pool};

/// Sends `request` to `pool`'s upstream on an idle connection or a new one, and waits for
/// the response head, until `due_ns` (the pool's clock; `None`: no deadline) at the
/// latest: [`ExchangeError::TimedOut`] then, whether the time went in connecting, in
/// waiting for the connection or for the answer. When a reused connection turns out
/// closed before the request was written, the request goes out once more, on a new
/// connection.
pub(crate) async fn exchange(
    pool: &Arc<Pool>,
    request: Request<Outbound>,
    due_ns: Option<u64>,
) -> Result<Response<PooledBody>, ExchangeError> {
    let mut request = request;
    let mut idle = poll_fn(|cx| Poll::Ready(pool.take(cx))).await;
    // The copy of a request sent on a stale connection, to send once more.
    let mut spare = None;
    loop {
        let reused = idle.is_some();
        let mut conn = match idle.take() {
            Some(conn) => conn,
            None => connect(pool, due_ns).await?,
        };
        if reused && spare.is_none() && pool.stale(&conn) {
            spare = resendable(&request);
        }
        // Ready for a request (the connection driven meanwhile: it is ours alone).
        let ready = poll_fn(|cx| {
            conn.poll_with(cx, |io, cx| {
                if io.drive(cx) {
                    return Poll::Ready(Some(Err(None)));
                }
                let ready = io.sender.poll_ready(cx).map_err(Some);
                in_time(io, pool, due_ns, cx, ready)
            })
        })
        .await;
        match ready {
            Some(Ok(())) => {}
            None => return Err(ExchangeError::TimedOut),
            Some(Err(_)) if reused => continue,
            Some(Err(Some(e))) => return Err(ExchangeError::Http(e)),
            Some(Err(None)) => return Err(ExchangeError::Closed),
        }
        // Queued for the connection, which is woken by it: that wake is ours, and the poll
        // below drives the connection anyway.
        let sent = conn.quietly(|io| io.sender.try_send_request(request));
        let mut sent = std::pin::pin!(sent);
        let answer = poll_fn(|cx| {
            conn.poll_with(cx, |io, cx| {
                io.drive(cx);
                let answer = sent.as_mut().poll(cx);
                in_time(io, pool, due_ns, cx, answer)
            })
        })
        .await;
        // Past the deadline: the connection, with the request on it, is dropped.
        let Some(answer) = answer else {
            return Err(ExchangeError::TimedOut);
        };
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

/// A new connection, within the connect timeout and before `due_ns`: a connect cut short
/// by the request's deadline is [`ExchangeError::TimedOut`], like any other wait past it.
async fn connect(pool: &Pool, due_ns: Option<u64>) -> Result<Conn, ExchangeError> {
    let Some(due_ns) = due_ns else {
        return pool.connect(pool.connect_timeout).await;
    };
    let left = Duration::from_nanos(due_ns.saturating_sub(pool.clock.now_ns()));
    if left.is_zero() {
        return Err(ExchangeError::TimedOut);
    }
    match pool.connect(left.min(pool.connect_timeout)).await {
        Err(ExchangeError::Connect(e))
            if e.kind() == std::io::ErrorKind::TimedOut && left <= pool.connect_timeout =>
        {
            Err(ExchangeError::TimedOut)
        }
        other => other,
    }
}

/// `poll`, or `None` when it is pending and `due_ns` has come (the connection's timer
/// armed to wake the task by then, if it has not).
fn in_time<T>(
    io: &mut ConnIo,
    pool: &Pool,
    due_ns: Option<u64>,
    cx: &mut Context<'_>,
    poll: Poll<T>,
) -> Poll<Option<T>> {
    match (poll, due_ns) {
        (Poll::Ready(value), _) => Poll::Ready(Some(value)),
        (Poll::Pending, Some(due_ns)) if io.deadline.poll(&pool.clock, due_ns, cx).is_ready() => {
            Poll::Ready(None)
        }
        (Poll::Pending, _) => Poll::Pending,
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
    use std::time::Duration;

    use http_body_util::BodyExt as _;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpListener;

    use super::*;
    use crate::pool::IDLE_TIMEOUT;
    use crate::upstream::Upstream;
    use weir_engine::thread_shard;

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
        /// Answers the first request, keep-alive; reads the second and holds the
        /// connection open without an answer.
        StallsOnTheSecond,
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
                            Upstreaming::StallsOnTheSecond if served == 2 => {
                                std::future::pending::<()>().await;
                                return;
                            }
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
                            Upstreaming::KeepAlive
                                | Upstreaming::SwallowsTheSecond
                                | Upstreaming::StallsOnTheSecond
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
        let response = exchange(pool, get(), None).await?;
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Ok(String::from_utf8(body.to_vec()).unwrap())
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
            exchange(&pool, post, None).await.is_err(),
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

    /// The upstream timeout costs no timer a request: a keep-alive connection's requests,
    /// each with its own deadline, share the timer armed for the first.
    #[tokio::test]
    async fn a_connections_requests_share_one_timer_for_their_deadlines() {
        let (up, accepted) = upstream(Upstreaming::KeepAlive).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        for _ in 0..50 {
            let due = pool.due_in(Duration::from_secs(30));
            let response = exchange(&pool, get(), Some(due)).await.unwrap();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "ok");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        let idle = pool.idle().unwrap().lock().unwrap();
        let arms: Vec<u64> = idle.iter().map(|conn| conn.io.deadline.arms()).collect();
        assert!(arms.iter().all(|&n| n <= 1), "timers armed: {arms:?}");
    }

    /// An upstream that takes the request and never answers: the exchange ends at the
    /// request's deadline, and the connection (a request still on it) is not pooled.
    #[tokio::test]
    async fn an_answer_that_does_not_come_by_the_deadline_is_a_time_out() {
        let (up, _) = upstream(Upstreaming::StallsOnTheSecond).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        assert_eq!(round(&pool).await.unwrap(), "ok");
        assert_eq!(pool.idle_count(), 1);
        let due = pool.due_in(Duration::from_millis(100));
        let stalled = exchange(&pool, get(), Some(due)).await;
        assert!(
            matches!(stalled, Err(ExchangeError::TimedOut)),
            "{stalled:?}"
        );
        assert!(pool.clock.now_ns() >= due, "not before the deadline");
        assert_eq!(pool.idle_count(), 0);
        // A deadline already past: no connection is even tried.
        let past = pool.due_in(Duration::ZERO);
        assert!(matches!(
            exchange(&pool, get(), Some(past)).await,
            Err(ExchangeError::TimedOut)
        ));
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
            held.push(exchange(&pool, get(), None).await.unwrap());
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 3);
        for response in held {
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "ok");
        }
        assert_eq!(pool.idle_count(), 2, "the third was closed");
        // A body dropped before its end takes its connection with it.
        let unread = exchange(&pool, get(), None).await.unwrap();
        assert_eq!(pool.idle_count(), 1);
        drop(unread);
        assert_eq!(pool.idle_count(), 1);
    }

    /// Each thread takes only the idle connections it dialled (their sockets are watched
    /// by its reactor when it is a connection thread): a second thread dials its own, and
    /// the first still finds its connection.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_thread_reuses_only_the_connections_it_dialled() {
        let (up, accepted) = upstream(Upstreaming::KeepAlive).await;
        let pool = Arc::new(Pool::new(up, Duration::from_secs(1)));
        // One round on `runtime` (this thread's own), unless this thread's shard is `not`;
        // the shard. A connection lives as long as the runtime whose reactor watches it.
        let round_here =
            |pool: &Arc<Pool>, runtime: &tokio::runtime::Runtime, not: Option<usize>| {
                let shard = thread_shard::this_thread(pool.idle.len());
                if not != Some(shard) {
                    assert_eq!(runtime.block_on(round(pool)).unwrap(), "ok");
                }
                shard
            };
        let runtime = || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
        };
        let (first_done, first_shard) = std::sync::mpsc::channel();
        let (go_on, again) = std::sync::mpsc::channel::<()>();
        let first = std::thread::spawn({
            let pool = Arc::clone(&pool);
            move || {
                let own = runtime();
                first_done.send(round_here(&pool, &own, None)).unwrap();
                again.recv().unwrap();
                round_here(&pool, &own, None);
            }
        });
        let pool_b = Arc::clone(&pool);
        tokio::task::spawn_blocking(move || {
            let shard_a = first_shard.recv().unwrap();
            assert_eq!(accepted.load(Ordering::SeqCst), 1);
            // A second thread on another shard (threads of other tests take indexes too).
            while std::thread::spawn({
                let pool = Arc::clone(&pool_b);
                move || round_here(&pool, &runtime(), Some(shard_a))
            })
            .join()
            .unwrap()
                == shard_a
            {}
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                2,
                "the second thread dialled"
            );
            go_on.send(()).unwrap();
            first.join().unwrap();
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                2,
                "the first reused its own"
            );
        })
        .await
        .unwrap();
        assert_eq!(pool.idle_count(), 2);
    }
}
