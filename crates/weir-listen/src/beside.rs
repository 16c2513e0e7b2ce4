//! [`beside`]: how [`drive`](crate::accept::drive) runs a connection together with what
//! can end it from outside (the server's stop, the idle watch), in one task, polling the
//! outside part only when its own waker fired.
//!
//! `tokio::select!` polls every branch each time the task wakes, and a connection's task
//! wakes several times a request. The stop signal is a `watch` channel every connection
//! shares: each poll of its `Notified` took that channel's one waiter lock, written by
//! every core (with the idle watch's timer registration, a few per cent of `weir serve`'s
//! CPU on `/v1/check`: docs/benchmarks-history.md, "`/v1/check` near its ceiling"). Here
//! the side future gets a waker of its own, which marks it woken and wakes the task; the
//! connection is polled on every wake, the side only on its own wakes (and on the first
//! poll, to register).
//!
//! The side is polled **before** the connection in the same poll, so what it changes on
//! waking (the header-read timer marking a deadline due, `http/head_timer.rs`) is seen by
//! the connection in that same poll.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

/// Which of the two futures of [`beside`] completed first.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum First<M, S> {
    Main(M),
    Side(S),
}

/// Runs `main` and `side` in the caller's task until one completes: `main` polled on every
/// wake, `side` on its own wakes only.
pub(crate) fn beside<M, S>(main: M, side: S) -> Beside<M, S>
where
    M: Future + Unpin,
    S: Future + Unpin,
{
    let wake = Arc::new(SideWake {
        // Polled on the first poll, so that it registers.
        woken: AtomicBool::new(true),
        task: Mutex::new(None),
    });
    Beside {
        main,
        side,
        side_waker: Waker::from(Arc::clone(&wake)),
        wake,
    }
}

/// The future [`beside`] returns.
pub(crate) struct Beside<M, S> {
    main: M,
    side: S,
    wake: Arc<SideWake>,
    /// `wake` as a waker, made once.
    side_waker: Waker,
}

/// The side's waker: marks it woken and wakes the task.
struct SideWake {
    woken: AtomicBool,
    /// The task's waker, as of its last poll.
    task: Mutex<Option<Waker>>,
}

impl Wake for SideWake {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        // Woken outside the lock: a waker may do anything.
        let task = self
            .task
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(task) = task {
            task.wake();
        }
    }
}

impl<M, S> Future for Beside<M, S>
where
    M: Future + Unpin,
    S: Future + Unpin,
{
    type Output = First<M::Output, S::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        {
            // The connection's own lock: uncontended unless the side is being woken.
            let mut task = this
                .wake
                .task
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match &*task {
                Some(known) if known.will_wake(cx.waker()) => {}
                _ => *task = Some(cx.waker().clone()),
            }
        }
        if this.wake.woken.load(Ordering::Acquire) && this.wake.woken.swap(false, Ordering::AcqRel)
        {
            let mut side_cx = Context::from_waker(&this.side_waker);
            if let Poll::Ready(out) = Pin::new(&mut this.side).poll(&mut side_cx) {
                return Poll::Ready(First::Side(out));
            }
        }
        if let Poll::Ready(out) = Pin::new(&mut this.main).poll(cx) {
            return Poll::Ready(First::Main(out));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    use super::*;

    /// Counts the polls of the future it wraps.
    struct Counted<F>(F, Arc<AtomicUsize>);

    impl<F: Future + Unpin> Future for Counted<F> {
        type Output = F::Output;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
            self.1.fetch_add(1, Ordering::Relaxed);
            Pin::new(&mut self.0).poll(cx)
        }
    }

    /// The main future's wakes do not poll the side; the side's own wake does, and its
    /// completion ends the pair.
    #[tokio::test]
    async fn the_side_is_polled_only_when_it_was_woken() {
        let side_polls = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let side = Counted(rx, Arc::clone(&side_polls));
        let main_polls = Arc::new(AtomicUsize::new(0));
        let main = Box::pin({
            let main_polls = Arc::clone(&main_polls);
            async move {
                // Ten wakes of its own, then it wakes the side and waits for ever.
                for _ in 0..10 {
                    main_polls.fetch_add(1, Ordering::Relaxed);
                    tokio::task::yield_now().await;
                }
                let _ = tx.send(());
                std::future::pending::<()>().await;
            }
        });
        let first = tokio::time::timeout(Duration::from_secs(10), beside(main, side))
            .await
            .expect("the side's wake ended the pair");
        assert_eq!(first, First::Side(Ok(())));
        assert_eq!(main_polls.load(Ordering::Relaxed), 10);
        assert_eq!(
            side_polls.load(Ordering::Relaxed),
            2,
            "once to register, once when the channel woke it"
        );
    }

    /// The main future completing ends the pair with its output.
    #[tokio::test]
    async fn the_main_future_completing_ends_the_pair() {
        let main = Box::pin(async {
            tokio::task::yield_now().await;
            7
        });
        let side = Box::pin(std::future::pending::<()>());
        assert_eq!(beside(main, side).await, First::Main(7));
    }
}
