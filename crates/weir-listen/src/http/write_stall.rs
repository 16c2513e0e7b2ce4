//! [`Watched`]: an HTTP connection's socket with its writes watched for a stall, so that a
//! client that stops reading its answers is disconnected (`listener.rs` wraps every HTTP/1
//! connection, TLS or not, in it; the connection's timer, `head_timer.rs`, does the
//! watching).
//!
//! A write that cannot proceed (the socket's send buffer is full: the client reads nothing)
//! notes when it began, once; the next write that proceeds clears it. The connection's
//! timer watcher, which already runs beside the connection for the header-read timeout,
//! marks a stall expired once it has lasted that same timeout (so a stalled client is
//! closed after one to two timeouts: the watcher looks at least once a timeout); from then
//! on every write fails (`TimedOut`), hyper gives the connection up and its task ends.
//! Before this, a client that sent requests and never read the answers held its
//! connection, its task and its buffers for as long as it kept the socket open, and a
//! shutdown waited for it until the grace ran out (SECURITY.md, rule 6).
//!
//! On the hot path a write that proceeds costs two plain loads (before the write: expired?
//! after it: a stall to clear?) of a word only this connection's task and its watcher
//! touch; the clock is read only when a write stalls.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::head_timer::HeadTimer;

/// A connection's stream whose stalled writes the connection's [`HeadTimer`] watches.
#[derive(Debug)]
pub(crate) struct Watched<S> {
    stream: S,
    timer: HeadTimer,
}

impl<S> Watched<S> {
    pub(crate) fn new(stream: S, timer: HeadTimer) -> Self {
        Self { stream, timer }
    }

    /// What a write's result means for the watch: `Pending` starts a stall (unless one is
    /// running), anything else ends it.
    fn noted<T>(&self, result: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match &result {
            Poll::Pending => self.timer.write_stalled(),
            Poll::Ready(_) => self.timer.write_proceeded(),
        }
        result
    }

    /// The error every write answers once the watcher found a stall expired.
    fn expired(&self) -> Option<io::Error> {
        self.timer.write_expired().then(|| {
            io::Error::new(
                io::ErrorKind::TimedOut,
                "the client read nothing of its answers for the header-read timeout",
            )
        })
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.expired() {
            return Poll::Ready(Err(error));
        }
        let result = Pin::new(&mut self.stream).poll_write(cx, buf);
        self.noted(result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        if let Some(error) = self.expired() {
            return Poll::Ready(Err(error));
        }
        let result = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        self.noted(result)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(error) = self.expired() {
            return Poll::Ready(Err(error));
        }
        let result = Pin::new(&mut self.stream).poll_flush(cx);
        self.noted(result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(error) = self.expired() {
            return Poll::Ready(Err(error));
        }
        let result = Pin::new(&mut self.stream).poll_shutdown(cx);
        self.noted(result)
    }
}
