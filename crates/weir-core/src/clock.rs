//! Time sources. The only file in Weir that reads the machine's clock.
//!
//! Every decision takes `now` as integer nanoseconds since the Unix epoch (`u64`, good until
//! the year 2554). Algorithms never read a clock: the [`Limiter`](crate::Limiter) asks a
//! [`Clock`] once per call and passes the number down, so tests and simulations drive time by
//! hand with [`ManualClock`].

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::time::duration_ns;

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
}

/// The production clock: monotonic (`std::time::Instant`) and anchored once to the wall clock,
/// so it counts from the Unix epoch but a wall-clock step (NTP, an operator) never moves it.
///
/// `sleep_until` uses tokio's timer (feature `tokio`, on by default) and must run inside a
/// tokio runtime; without the feature it completes at once.
#[derive(Debug, Clone)]
pub struct SystemClock {
    anchor: Instant,
    anchor_unix_ns: u64,
}

impl SystemClock {
    /// A clock anchored to the wall clock at this moment.
    #[allow(clippy::disallowed_methods)] // the one place that reads the machine's clock
    pub fn new() -> Self {
        let anchor_unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(duration_ns)
            .unwrap_or(0);
        Self {
            anchor: Instant::now(),
            anchor_unix_ns,
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.anchor_unix_ns
            .saturating_add(duration_ns(self.anchor.elapsed()))
    }

    fn sleep_until(&self, deadline_ns: u64) -> Sleep {
        let wait = Duration::from_nanos(deadline_ns.saturating_sub(self.now_ns()));
        #[cfg(feature = "tokio")]
        {
            Box::pin(tokio::time::sleep(wait))
        }
        #[cfg(not(feature = "tokio"))]
        {
            let _ = wait;
            Box::pin(std::future::ready(()))
        }
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// Pending [`sleep_until`](Clock::sleep_until) futures wake when [`advance`](Self::advance) or
/// [`set_ns`](Self::set_ns) carries the time past their deadline.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Clock, ManualClock};
///
/// let clock = ManualClock::new(1_000);
/// clock.advance(Duration::from_micros(1));
/// assert_eq!(clock.now_ns(), 2_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug, Default)]
struct ManualInner {
    now_ns: AtomicU64,
    /// Pending sleeps: (id, deadline, waker). A sleep updates its own entry when polled
    /// again and removes it when dropped, so `sleepers()` counts live sleeps only.
    sleepers: Mutex<Vec<(u64, u64, Waker)>>,
    next_sleep_id: AtomicU64,
}

impl ManualClock {
    /// A clock reading `start_ns` nanoseconds since the Unix epoch.
    pub fn new(start_ns: u64) -> Self {
        let clock = Self::default();
        clock.inner.now_ns.store(start_ns, Ordering::SeqCst);
        clock
    }

    /// Moves time forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by_ns = duration_ns(by);
        let now = self
            .inner
            .now_ns
            .fetch_add(by_ns, Ordering::SeqCst)
            .saturating_add(by_ns);
        self.wake_due(now);
    }

    /// Sets the time; a value in the past is ignored, because a clock never goes backwards.
    pub fn set_ns(&self, now_ns: u64) {
        let now = self
            .inner
            .now_ns
            .fetch_max(now_ns, Ordering::SeqCst)
            .max(now_ns);
        self.wake_due(now);
    }

    /// How many `sleep_until` futures are waiting for time to move.
    pub fn sleepers(&self) -> usize {
        self.inner.sleepers.lock().map(|s| s.len()).unwrap_or(0)
    }

    fn wake_due(&self, now_ns: u64) {
        let due: Vec<Waker> = match self.inner.sleepers.lock() {
            Ok(mut sleepers) => {
                let mut due = Vec::new();
                sleepers.retain(|(_, deadline, waker)| {
                    if *deadline <= now_ns {
                        due.push(waker.clone());
                        false
                    } else {
                        true
                    }
                });
                due
            }
            Err(_) => Vec::new(),
        };
        due.into_iter().for_each(Waker::wake);
    }
}

impl Clock for ManualClock {
    #[inline]
    fn now_ns(&self) -> u64 {
        self.inner.now_ns.load(Ordering::SeqCst)
    }

    fn sleep_until(&self, deadline_ns: u64) -> Sleep {
        Box::pin(ManualSleep {
            clock: self.clone(),
            deadline_ns,
            id: self.inner.next_sleep_id.fetch_add(1, Ordering::Relaxed),
        })
    }
}

struct ManualSleep {
    clock: ManualClock,
    deadline_ns: u64,
    id: u64,
}

impl Drop for ManualSleep {
    fn drop(&mut self) {
        if let Ok(mut sleepers) = self.clock.inner.sleepers.lock() {
            sleepers.retain(|(id, _, _)| *id != self.id);
        }
    }
}

impl Future for ManualSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.clock.now_ns() >= self.deadline_ns {
            return Poll::Ready(());
        }
        if let Ok(mut sleepers) = self.clock.inner.sleepers.lock() {
            let entry = (self.id, self.deadline_ns, cx.waker().clone());
            match sleepers.iter_mut().find(|(id, _, _)| *id == self.id) {
                Some(existing) => *existing = entry,
                None => sleepers.push(entry),
            }
        }
        // Time may have moved between the check and the registration.
        if self.clock.now_ns() >= self.deadline_ns {
            return Poll::Ready(());
        }
        Poll::Pending
    }
}

impl<C: Clock> Clock for Arc<C> {
    fn now_ns(&self) -> u64 {
        (**self).now_ns()
    }
    fn sleep_until(&self, deadline_ns: u64) -> Sleep {
        (**self).sleep_until(deadline_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_counts_from_the_epoch_and_never_goes_back() {
        let clock = SystemClock::new();
        let a = clock.now_ns();
        let b = clock.now_ns();
        assert!(a > 1_600_000_000_000_000_000, "{a} is not after 2020");
        assert!(b >= a);
    }

    #[test]
    fn manual_clock_ignores_a_step_back() {
        let clock = ManualClock::new(10);
        clock.set_ns(5);
        assert_eq!(clock.now_ns(), 10);
        clock.set_ns(20);
        assert_eq!(clock.now_ns(), 20);
    }

    #[tokio::test]
    async fn manual_sleep_wakes_when_time_passes_the_deadline() {
        let clock = ManualClock::new(0);
        let sleeper = tokio::spawn(clock.sleep_until(100));
        tokio::task::yield_now().await;
        clock.advance(Duration::from_nanos(99));
        tokio::task::yield_now().await;
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_nanos(1));
        sleeper.await.unwrap();
    }
}
