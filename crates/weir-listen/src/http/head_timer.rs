//! [`HeadTimer`]: the timer hyper's HTTP/1 server uses for one connection's header-read
//! timeout (`listener.rs`), without a tokio timer entry, a lock or a waker per request.
//!
//! hyper starts the header-read clock each time a connection waits for a request head:
//! with `TokioTimer`, a boxed tokio `Sleep` a request, registered in tokio's timer wheel
//! while the connection waits and removed once the head has arrived (about 3 % of
//! `weir serve`'s CPU on `/v1/check`: docs/benchmarks-history.md, "Hot paths"). Here the
//! sleep hyper gets only records its deadline in one atomic word of the connection's
//! timer; one watcher per connection ([`HeadTimer::watch`]) sleeps until the deadline
//! armed when it last looked and, if that same deadline is still armed then, marks it due.
//! While requests keep coming, the deadline moves on and the watcher wakes about once per
//! timeout, not once per request; a deadline still fires when it is due (the watcher,
//! finding none armed, waits at most one timeout, and any deadline armed meanwhile is at
//! least one timeout after it looked).
//!
//! **The watcher runs in the connection's own task**, as the side future of `drive`
//! (`beside.rs`), which polls it before the connection whenever it wakes: the connection
//! sees a deadline marked due in that same poll, so hyper's sleep needs no waker of its
//! own (and the watcher, having marked one, yields once, which polls both again).
//!
//! hyper's HTTP/1 server holds at most one such sleep at a time (the header-read timeout is
//! its only use of the timer); any other sleep asked of this timer is a plain tokio one.
//!
//! **The same watcher bounds a stalled write** (`write_stall.rs`): a write the client's
//! socket cannot take notes when it began in a second word, and the watcher marks that
//! stall expired once it has lasted the period (the header-read timeout), after which the
//! connection's writes fail and hyper closes it. A client must read its answers as it must
//! send its heads: making no progress for one timeout.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use hyper::rt::{Sleep, Timer};

/// One connection's header-read timer (cheap to clone: one `Arc`).
#[derive(Debug, Clone)]
pub(crate) struct HeadTimer {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// Deadlines are kept as nanoseconds after this instant.
    base: Instant,
    /// The deadline of the sleep hyper holds (its [`code`]), with [`DUE`] set once the
    /// watcher found it due; 0 when none is armed.
    armed: AtomicU64,
    /// When the write that cannot proceed began to wait (its [`code`]), with [`DUE`] set
    /// once the watcher found the stall expired; 0 while writes proceed.
    stalled: AtomicU64,
}

/// Set in [`Shared::armed`] once the armed deadline is due, and in [`Shared::stalled`]
/// once the stall has lasted the period.
const DUE: u64 = 1 << 63;

impl Default for HeadTimer {
    // hyper's deadlines are `std::time::Instant`s of its own clock (its `Timer::now`, by
    // default `Instant::now`); the base only has to come before them. No decision reads it.
    #[allow(clippy::disallowed_methods)]
    fn default() -> Self {
        HeadTimer {
            shared: Arc::new(Shared {
                base: Instant::now(),
                armed: AtomicU64::new(0),
                stalled: AtomicU64::new(0),
            }),
        }
    }
}

impl HeadTimer {
    /// `deadline` as kept in [`Shared::armed`]: nanoseconds after `base`, plus one so that
    /// no deadline is 0, below [`DUE`] (a deadline before `base` counts as `base`; one
    /// beyond 292 years as then).
    fn code(&self, deadline: Instant) -> u64 {
        let after = deadline.saturating_duration_since(self.shared.base);
        u64::try_from(after.as_nanos())
            .unwrap_or(u64::MAX)
            .min(DUE - 2)
            + 1
    }

    fn instant(&self, code: u64) -> Instant {
        self.shared.base + Duration::from_nanos(code - 1)
    }

    /// Marks the armed deadline due whenever it comes, and a write stall expired once it
    /// has lasted `period`; never completes (run beside the connection, in its task, it
    /// ends with it). `period`: the header-read timeout, and how long to wait when nothing
    /// is armed (at least a millisecond, so a zero timeout cannot make the watcher spin).
    pub(crate) async fn watch(self, period: Duration) {
        let period = period.max(Duration::from_millis(1));
        let (armed, stalled) = (&self.shared.armed, &self.shared.stalled);
        loop {
            let head = armed.load(Ordering::Acquire);
            let stall = stalled.load(Ordering::Acquire);
            let head_at = (head != 0 && head & DUE == 0).then(|| self.instant(head));
            let stall_at = (stall != 0 && stall & DUE == 0).then(|| self.instant(stall) + period);
            let Some(at) = head_at.into_iter().chain(stall_at).min() else {
                tokio::time::sleep(period).await;
                continue;
            };
            tokio::time::sleep_until(at.into()).await;
            // Each is marked only if it is still the one looked at (a new head or a write
            // that proceeded since replaced it).
            let mut marked = false;
            for (word, code, due_at) in [(armed, head, head_at), (stalled, stall, stall_at)] {
                if due_at.is_some_and(|due_at| due_at <= at) {
                    marked |= word
                        .compare_exchange(code, code | DUE, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok();
                }
            }
            if marked {
                // `beside` polls the connection right after this; the yield has the task
                // polled once more in any case.
                tokio::task::yield_now().await;
            }
        }
    }

    /// A write could not proceed: the stall starts now unless one is running. Only the
    /// connection's task calls this and [`write_proceeded`](Self::write_proceeded); the
    /// watcher only ever adds [`DUE`].
    pub(crate) fn write_stalled(&self) {
        let stalled = &self.shared.stalled;
        if stalled.load(Ordering::Relaxed) == 0 {
            // hyper's clock, as for its deadlines (the stall is measured on the same base).
            #[allow(clippy::disallowed_methods)]
            let now = Instant::now();
            stalled.store(self.code(now), Ordering::Release);
        }
    }

    /// A write proceeded: no stall (unless the watcher already found it expired, which
    /// stays: the connection is being given up).
    pub(crate) fn write_proceeded(&self) {
        let stalled = &self.shared.stalled;
        let stall = stalled.load(Ordering::Relaxed);
        if stall != 0 && stall & DUE == 0 {
            // A CAS, not a store: the watcher may be marking it expired right now.
            let _ = stalled.compare_exchange(stall, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
    }

    /// Whether the watcher found a write stall expired.
    pub(crate) fn write_expired(&self) -> bool {
        self.shared.stalled.load(Ordering::Acquire) & DUE != 0
    }
}

impl Timer for HeadTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn Sleep>> {
        Box::pin(TokioSleep(Box::pin(tokio::time::sleep(duration))))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn Sleep>> {
        let code = self.code(deadline);
        self.shared.armed.store(code, Ordering::Release);
        Box::pin(HeadSleep {
            shared: Arc::clone(&self.shared),
            code,
        })
    }
}

/// The sleep hyper holds while a connection waits for a request head.
struct HeadSleep {
    shared: Arc<Shared>,
    code: u64,
}

impl Future for HeadSleep {
    type Output = ();

    /// Ready once the watcher marked this deadline due. No waker is kept: the watcher runs
    /// in this same task and polls it right after marking (module header).
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        if self.shared.armed.load(Ordering::Acquire) == self.code | DUE {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

impl Sleep for HeadSleep {}

impl Drop for HeadSleep {
    /// Disarms the timer if this sleep's deadline is the armed one (hyper makes the next
    /// sleep before dropping the one it replaces). Only this connection's task writes the
    /// word besides the watcher, which only ever adds [`DUE`]: a plain store is enough.
    fn drop(&mut self) {
        let armed = &self.shared.armed;
        if armed.load(Ordering::Relaxed) & !DUE == self.code {
            armed.store(0, Ordering::Relaxed);
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
    use std::task::Waker;

    use super::*;
    use crate::beside::{beside, First};

    fn poll_once(sleep: &mut Pin<Box<dyn Sleep>>) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        sleep.as_mut().poll(&mut cx).is_ready()
    }

    /// A sleep whose deadline comes completes, polled beside its watcher as `drive` runs
    /// them; one replaced by a later deadline before it came never does; dropping the
    /// armed one disarms the timer.
    #[tokio::test]
    async fn a_due_deadline_completes_and_a_moved_one_does_not() {
        let timer = HeadTimer::default();
        // hyper's own clock for deadlines (the Timer trait's default `now`).
        let now = Timer::now(&timer);
        let mut first = timer.sleep_until(now + Duration::from_millis(30));
        // Re-armed later before it came: the first never completes, the second does.
        let second = timer.sleep_until(now + Duration::from_millis(60));
        let watcher = Box::pin(timer.clone().watch(Duration::from_millis(20)));
        let first_done = tokio::time::timeout(Duration::from_secs(10), beside(second, watcher))
            .await
            .expect("the armed deadline came and completed the sleep");
        assert_eq!(first_done, First::Main(()));
        assert!(
            !poll_once(&mut first),
            "a deadline replaced before it came never fires"
        );
        drop(first);
        // The second sleep went with `beside`: nothing is armed.
        assert_eq!(timer.shared.armed.load(Ordering::Relaxed), 0);
    }

    /// A deadline armed after the watcher found nothing armed still fires, within one
    /// period of the watcher after it is due.
    #[tokio::test]
    async fn a_deadline_armed_while_the_watcher_waits_fires() {
        let timer = HeadTimer::default();
        let mut watcher = Box::pin(timer.clone().watch(Duration::from_millis(20)));
        // The watcher looks first and finds nothing armed.
        assert!(poll_once_future(&mut watcher).is_pending());
        let sleep = timer.sleep_until(Timer::now(&timer) + Duration::from_millis(10));
        let done = tokio::time::timeout(Duration::from_secs(10), beside(sleep, watcher))
            .await
            .expect("the deadline fired");
        assert_eq!(done, First::Main(()));
    }

    /// A write stall the watcher sees last its period is marked expired (and stays so); a
    /// write that proceeds before clears the stall, and nothing expires.
    #[tokio::test]
    async fn a_write_stall_expires_after_its_period_and_progress_clears_it() {
        let timer = HeadTimer::default();
        timer.write_stalled();
        timer.write_proceeded();
        assert_eq!(timer.shared.stalled.load(Ordering::Relaxed), 0);
        let watcher = Box::pin(timer.clone().watch(Duration::from_millis(20)));
        let quiet = tokio::time::sleep(Duration::from_millis(80));
        assert_eq!(beside(Box::pin(quiet), watcher).await, First::Main(()));
        assert!(!timer.write_expired(), "no stall, nothing expired");

        timer.write_stalled();
        let first = timer.shared.stalled.load(Ordering::Relaxed);
        timer.write_stalled();
        assert_eq!(
            timer.shared.stalled.load(Ordering::Relaxed),
            first,
            "a stall running keeps its start"
        );
        let watcher = Box::pin(timer.clone().watch(Duration::from_millis(20)));
        let expired = std::future::poll_fn(|_| {
            if timer.write_expired() {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        });
        let done =
            tokio::time::timeout(Duration::from_secs(10), beside(Box::pin(expired), watcher))
                .await
                .expect("the stall expired");
        assert_eq!(done, First::Main(()));
        timer.write_proceeded();
        assert!(timer.write_expired(), "an expired stall stays expired");
    }

    /// A sleep dropped before its deadline disarms the timer: the watcher marks nothing.
    #[test]
    fn dropping_the_armed_sleep_disarms() {
        let timer = HeadTimer::default();
        let sleep = timer.sleep_until(Timer::now(&timer) + Duration::from_secs(30));
        assert_ne!(timer.shared.armed.load(Ordering::Relaxed), 0);
        drop(sleep);
        assert_eq!(timer.shared.armed.load(Ordering::Relaxed), 0);
    }

    /// Deadlines round-trip through their code to the nanosecond, and none is 0 or due.
    #[test]
    fn codes_round_trip() {
        let timer = HeadTimer::default();
        let base = timer.shared.base;
        for after in [0, 1, 999, 5_000_000_000] {
            let at = base + Duration::from_nanos(after);
            let code = timer.code(at);
            assert!(code != 0 && code & DUE == 0);
            assert_eq!(timer.instant(code), at);
        }
        assert_eq!(timer.code(base - Duration::from_secs(1)), timer.code(base));
    }

    fn poll_once_future<F: Future + Unpin>(future: &mut F) -> Poll<F::Output> {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(future).poll(&mut cx)
    }
}
