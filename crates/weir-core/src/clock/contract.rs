//! The [`Clock`] trait every decision reads `now` from (once per call, by the
//! [`Limiter`](crate::Limiter)), its boxed [`Sleep`], and the small executor its default
//! `sleep_until_blocking` parks the thread with. `system.rs` and `manual.rs` implement it.

use std::future::Future;
use std::pin::{pin, Pin};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::{self, Thread};

/// A boxed future returned by [`Clock::sleep_until`].
pub type Sleep = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// A source of time for decisions.
///
/// `now_ns` must never go backwards for one clock. Windows (fixed window, sliding counter
/// buckets) are aligned to the Unix epoch, so `now_ns` counts from it.
pub trait Clock: Send + Sync + 'static {
    /// Nanoseconds since the Unix epoch.
    fn now_ns(&self) -> u64;

    /// A future that completes once `now_ns() >= deadline_ns`. Used by
    /// [`Limiter::wait`](crate::Limiter::wait); it never busy-loops.
    fn sleep_until(&self, deadline_ns: u64) -> Sleep;

    /// Blocks the calling thread until `now_ns() >= deadline_ns`, without spinning. Used by
    /// [`Limiter::wait_blocking`](crate::Limiter::wait_blocking); never call it from async
    /// code. The default drives [`sleep_until`](Self::sleep_until) on this thread, parking
    /// it until the sleep wakes it; [`SystemClock`](crate::SystemClock) sleeps the thread directly.
    fn sleep_until_blocking(&self, deadline_ns: u64) {
        block_on(self.sleep_until(deadline_ns));
    }
}

impl<C: Clock> Clock for Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    fn sleep_until(&self, deadline_ns: u64) -> Sleep {
        (**self).sleep_until(deadline_ns)
    }
    fn sleep_until_blocking(&self, deadline_ns: u64) {
        (**self).sleep_until_blocking(deadline_ns);
    }
}

/// Wakes a parked thread.
struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs `future` to completion on this thread, parked while it is pending.
fn block_on<F: Future>(future: F) -> F::Output {
    drive(future).0
}

/// [`block_on`], also counting the polls (tests check that a sleep did not spin).
pub(super) fn drive<F: Future>(future: F) -> (F::Output, u32) {
    let mut future = pin!(future);
    let waker = Waker::from(Arc::new(Unpark(thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut polls = 0u32;
    loop {
        polls = polls.saturating_add(1);
        if let Poll::Ready(output) = future.as_mut().poll(&mut cx) {
            return (output, polls);
        }
        // A wake before the park leaves a token, so the park returns at once.
        thread::park();
    }
}
