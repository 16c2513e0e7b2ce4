//! The client's request body as [`Forward`](crate::Forward) streams it upstream, bounded
//! by an idle timeout (the longest wait for its next frame), its failures told apart as
//! the client's.
//!
//! [`ClientBody`]: a framing error (bad chunked encoding, a short body) or a stall is the
//! client's fault: it is recorded in a [`ClientWatch`] so `Forward` answers `400` / `408`
//! instead of blaming the upstream, and the upstream request is abandoned. The watch also
//! tells `Forward` whether the request is waiting on the client (its response-head timer
//! does not run then) and when the body makes progress (the timer starts again).
//!
//! Not a size limit: bodies stream through unbuffered, whatever their length.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use hyper::body::{Bytes, Frame, SizeHint};
use tokio::sync::Notify;
use tokio::time::Sleep;

/// A body failure the proxy itself raises.
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

    fn record(&self, fault: ClientFault) {
        if let Ok(mut slot) = self.fault.lock() {
            slot.get_or_insert(fault);
        }
        self.waiting.store(false, Ordering::Release);
    }

    fn advanced(&self) {
        self.waiting.store(false, Ordering::Release);
        // A stored permit if no one waits yet: the progress is not lost.
        self.progress.notify_one();
    }
}

/// An idle timer: armed when a body first has nothing to give, disarmed by each frame.
#[derive(Debug)]
struct IdleTimer {
    idle: Duration,
    sleep: Option<Pin<Box<Sleep>>>,
}

impl IdleTimer {
    fn new(idle: Duration) -> Self {
        Self { idle, sleep: None }
    }

    /// Whether the body has now waited `idle` for its next frame (arming the timer on
    /// the first wait).
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> bool {
        let idle = self.idle;
        let sleep = self
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(idle)));
        sleep.as_mut().poll(cx).is_ready()
    }

    fn reset(&mut self) {
        self.sleep = None;
    }
}

/// The client's request body, watched (see the module docs).
#[derive(Debug)]
pub(crate) struct ClientBody {
    inner: Body,
    timer: IdleTimer,
    watch: Arc<ClientWatch>,
    failed: bool,
}

impl ClientBody {
    pub(crate) fn new(inner: Body, idle: Duration, watch: Arc<ClientWatch>) -> Self {
        Self {
            inner,
            timer: IdleTimer::new(idle),
            watch,
            failed: false,
        }
    }
}

impl hyper::body::Body for ClientBody {
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
                this.timer.reset();
                this.watch.advanced();
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => {
                this.failed = true;
                this.watch.record(ClientFault::Malformed(e.to_string()));
                Poll::Ready(Some(Err(BodyError::Failed(e))))
            }
            Poll::Ready(None) => {
                this.timer.reset();
                this.watch.advanced();
                Poll::Ready(None)
            }
            Poll::Pending => {
                this.watch.waiting.store(true, Ordering::Release);
                if this.timer.poll_expired(cx) {
                    this.failed = true;
                    this.watch.record(ClientFault::Stalled(this.timer.idle));
                    return Poll::Ready(Some(Err(BodyError::Stalled(this.timer.idle))));
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
