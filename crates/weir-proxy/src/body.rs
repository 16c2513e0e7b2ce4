//! The two bodies [`Forward`](crate::Forward) streams, each bounded by an idle timeout
//! (the longest wait for its next frame), their failures told apart by whose fault they
//! are. One wrapper, [`Watched`], times the body and reports to a [`Watcher`]:
//!
//! - [`ClientBody`], the client's request body on its way upstream: a framing error (bad
//!   chunked encoding, a short body) or a stall is the client's fault. It is recorded in a
//!   [`ClientWatch`] so `Forward` answers `400` / `408` instead of blaming the upstream,
//!   and the upstream request is abandoned. The watch also tells `Forward` whether the
//!   request is waiting on the client (its response-head timer does not run then) and
//!   when the body makes progress (the timer starts again).
//! - `UpstreamBody` (`answer.rs`), the upstream's response body on its way to the client: a stall (or
//!   a failure) is the upstream's fault. The body ends in an error, so the client's
//!   connection closes mid-response (a cut response, never a complete-looking one), with a
//!   WARN naming the upstream.
//!
//! The timer runs only while the body waits for its source, never while the other side
//! is slow to take what it already has: a slow reader is not a stalled writer.
//!
//! Not a size limit: bodies stream through unbuffered, whatever their length.
//!
//! No box either way: the client's body is hyper's `Incoming` as the listener read it,
//! sent upstream as an [`Outbound`] (the body type of the pool's connections); every
//! answer's body is a `ProxyBody` (`answer.rs`), the upstream's streamed or the proxy's own.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use tokio::sync::Notify;
use tokio::time::Sleep;

use crate::upstream::Upstream;

/// The client's request body, watched by a [`ClientWatch`].
pub(crate) type ClientBody = Watched<Incoming, Arc<ClientWatch>>;

/// Why a watched body failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum BodyError {
    /// No frame arrived within the idle timeout.
    #[error("no data for {} ms", .0.as_millis())]
    Stalled(Duration),
    /// The inner body failed (its message kept).
    #[error("{0}")]
    Failed(axum::Error),
}

/// Told what a [`Watched`] body does.
pub(crate) trait Watcher {
    /// A frame came, or the end.
    fn advanced(&self) {}
    /// The body waits for its source's next frame.
    fn waiting(&self) {}
    /// The body failed, for good.
    fn failed(&self, error: &BodyError);
}

/// A body with an idle timeout, reporting to `W`.
#[derive(Debug)]
pub(crate) struct Watched<B, W> {
    inner: B,
    idle: Duration,
    /// Armed when the body first has nothing to give, disarmed by each frame.
    sleep: Option<Pin<Box<Sleep>>>,
    watcher: W,
    failed: bool,
}

impl<B, W> Watched<B, W> {
    /// `inner`, failing when it gives nothing for `idle`.
    pub(crate) fn new(inner: B, idle: Duration, watcher: W) -> Self {
        Self {
            inner,
            idle,
            sleep: None,
            watcher,
            failed: false,
        }
    }
}

impl<B, W: Watcher> Watched<B, W> {
    fn fail(&mut self, error: BodyError) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        self.failed = true;
        self.watcher.failed(&error);
        Poll::Ready(Some(Err(error)))
    }
}

impl<B, W> hyper::body::Body for Watched<B, W>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
    W: Watcher + Unpin,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        if this.failed {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.sleep = None;
                this.watcher.advanced();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => this.fail(BodyError::Failed(axum::Error::new(e))),
            Poll::Ready(None) => {
                this.sleep = None;
                this.watcher.advanced();
                Poll::Ready(None)
            }
            Poll::Pending => {
                this.watcher.waiting();
                let idle = this.idle;
                let sleep = this
                    .sleep
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
                if sleep.as_mut().poll(cx).is_ready() {
                    return this.fail(BodyError::Stalled(idle));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.failed || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A request's body on its way upstream (the pool's connections all carry this type).
#[derive(Debug)]
pub(crate) enum Outbound {
    /// None: the client's had ended before it began (no body, `Content-Length: 0`), and
    /// there is nothing to watch.
    Empty,
    /// The client's, watched.
    Client(ClientBody),
}

impl hyper::body::Body for Outbound {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            Self::Empty => Poll::Ready(None),
            Self::Client(body) => Pin::new(body).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Empty => true,
            Self::Client(body) => body.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Empty => SizeHint::with_exact(0),
            Self::Client(body) => body.size_hint(),
        }
    }
}

/// How the client's request body failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ClientFault {
    /// Unreadable: bad chunked framing, a body shorter than its `Content-Length`, or a
    /// client that went away mid-body. The message says which.
    Malformed(String),
    /// The client sent nothing for the idle timeout.
    Stalled(Duration),
}

/// What `Forward` learns about the client's body while the upstream request runs.
#[derive(Debug, Default)]
pub(crate) struct ClientWatch {
    fault: Mutex<Option<ClientFault>>,
    waiting: AtomicBool,
    progress: Notify,
}

impl ClientWatch {
    /// The client's fault, if its body failed.
    pub(crate) fn fault(&self) -> Option<ClientFault> {
        self.fault.lock().ok().and_then(|fault| fault.clone())
    }

    /// Whether the body is waiting for the client's next bytes (so any delay now is the
    /// client's, not the upstream's).
    pub(crate) fn waiting_on_client(&self) -> bool {
        self.waiting.load(Ordering::Acquire)
    }

    /// Completes once the body has made progress (a frame, or its end) since the last
    /// call.
    pub(crate) async fn progressed(&self) {
        self.progress.notified().await;
    }
}

impl Watcher for Arc<ClientWatch> {
    fn advanced(&self) {
        self.waiting.store(false, Ordering::Release);
        // A stored permit if no one waits yet: the progress is not lost.
        self.progress.notify_one();
    }

    fn waiting(&self) {
        self.waiting.store(true, Ordering::Release);
    }

    fn failed(&self, error: &BodyError) {
        let fault = match error {
            BodyError::Stalled(idle) => ClientFault::Stalled(*idle),
            BodyError::Failed(e) => ClientFault::Malformed(e.to_string()),
        };
        if let Ok(mut slot) = self.fault.lock() {
            slot.get_or_insert(fault);
        }
        self.waiting.store(false, Ordering::Release);
    }
}

impl Watcher for Upstream {
    fn failed(&self, error: &BodyError) {
        match error {
            BodyError::Stalled(idle) => tracing::warn!(
                upstream = %self,
                idle_ms = idle.as_millis(),
                "upstream stalled mid-response; the client's response is cut"
            ),
            BodyError::Failed(e) => tracing::warn!(
                upstream = %self,
                error = %e,
                "upstream response body failed; the client's response is cut"
            ),
        }
    }
}
