//! [`HeadTimer`]: the timer hyper's HTTP/1 server uses for one connection's header-read
//! timeout (`listener.rs`), without a tokio timer entry per request.
//!
//! hyper starts the header-read clock each time a connection waits for a request head:
//! with `TokioTimer`, a boxed tokio `Sleep` a request, registered in tokio's timer wheel
//! while the connection waits and removed once the head has arrived (about 3 % of
//! `weir serve`'s CPU on `/v1/check`: docs/benchmarks-history.md, "Hot paths"). Here the sleep hyper gets
//! only records its deadline in the connection's own state; one watcher per connection
//! ([`HeadTimer::watch`], run beside the connection by the accept loop's `drive`) sleeps
//! until the deadline armed when it last looked, and wakes the connection if that same
//! deadline is still armed then, so hyper sees its sleep complete and closes the
//! connection as before. While requests keep coming, the deadline moves on and the watcher
//! wakes about once per timeout, not once per request; a deadline still fires exactly when
//! it is due (the watcher, finding it unarmed, waits at most one timeout, and any deadline
//! armed meanwhile is at least one timeout after it looked).
//!
//! hyper's HTTP/1 server holds at most one such sleep at a time (the header-read timeout is
//! its only use of the timer); any other sleep asked of this timer is a plain tokio one.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// One connection's header-read timer (cheap to clone: one `Arc`).
#[derive(Debug, Clone, Default)]
pub(crate) struct HeadTimer {
    state: Arc<Mutex<State>>,
}

#[derive(Debug, Default)]
struct State {
    /// The deadline of the sleep hyper holds, if any.
    armed: Option<Instant>,
    /// The armed deadline the watcher found due.
    expired: Option<Instant>,
    /// Who to wake when it is due: the connection's task.
    waker: Option<Waker>,
}

impl HeadTimer {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain values behind: still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Wakes the connection whenever the deadline it armed comes; never completes (run
    /// beside the connection, it ends with it). `period`: how long to wait when nothing is
    /// armed (the header-read timeout; at least a millisecond, so a zero timeout cannot
    /// make the watcher spin).
    pub(crate) async fn watch(self, period: Duration) {
        let period = period.max(Duration::from_millis(1));
        loop {
            let due = {
                let state = self.state();
                state.armed.filter(|&at| state.expired != Some(at))
            };
            let Some(at) = due else {
                tokio::time::sleep(period).await;
                continue;
            };
            tokio::time::sleep_until(at.into()).await;
            let waker = {
                let mut state = self.state();
                if state.armed == Some(at) {
                    state.expired = Some(at);
                    state.waker.take()
                } else {
                    None
                }
            };
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

impl Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(TokioSleep(Box::pin(tokio::time::sleep(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let mut state = self.state();
        state.armed = Some(deadline);
        state.expired = None;
        drop(state);
        Box::pin(HeadSleep {
            timer: self.clone(),
            deadline,
        })
    }
}

/// The sleep hyper holds while a connection waits for a request head.
struct HeadSleep {
    timer: HeadTimer,
    deadline: Instant,
}

impl Future for HeadSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.timer.state();
        if state.expired == Some(self.deadline) {
            return Poll::Ready(());
        }
        match &mut state.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl Sleep for HeadSleep {}

impl Drop for HeadSleep {
    fn drop(&mut self) {
        let mut state = self.timer.state();
        if state.armed == Some(self.deadline) {
            state.armed = None;
            state.waker = None;
        }
    }
}

/// Any other sleep: tokio's.
struct TokioSleep(Pin<Box<tokio::time::Sleep>>);

impl Future for TokioSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        self.0.as_mut().poll(cx)
    }
}

impl Sleep for TokioSleep {}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sleep whose deadline comes is woken and completes; one replaced by a later
    /// deadline before it came never does; dropping it disarms the watcher.
    #[tokio::test]
    async fn a_due_deadline_wakes_and_a_moved_one_does_not() {
        let timer = HeadTimer::default();
        let watcher = tokio::spawn(timer.clone().watch(Duration::from_millis(20)));
        // hyper's own clock for deadlines (the Timer trait's default `now`).
        let now = Timer::now(&timer);
        let mut first = timer.sleep_until(now + Duration::from_millis(30));
        // Re-armed later before it came: the first never completes, the second does.
        tokio::time::sleep(Duration::from_millis(5)).await;
        let second = timer.sleep_until(now + Duration::from_millis(60));
        tokio::time::timeout(Duration::from_secs(10), second)
            .await
            .unwrap_or_else(|_| panic!("the armed deadline came and woke the sleep"));
        let first_done = futures_poll_once(&mut first);
        assert!(
            !first_done,
            "a deadline replaced before it came never fires"
        );
        drop(first);
        // Both sleeps gone: nothing armed, the watcher waits and wakes nobody.
        assert!(timer.state().armed.is_none());
        watcher.abort();
    }

    fn futures_poll_once(sleep: &mut Pin<Box<dyn Sleep>>) -> bool {
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        sleep.as_mut().poll(&mut cx).is_ready()
    }
}
