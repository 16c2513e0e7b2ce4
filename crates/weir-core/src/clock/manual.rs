//! [`ManualClock`]: a clock that moves only when told to, for tests and simulations. It
//! never reads the machine's clock; its sleeps wake when the time is moved past them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use super::{Clock, Sleep};
use crate::time::duration_ns;

/// A clock that moves only when told to. Clones share the same time.
///
/// Pending [`sleep_until`](Clock::sleep_until) futures (and threads blocked in
/// [`sleep_until_blocking`](Clock::sleep_until_blocking)) wake when
/// [`advance`](Self::advance) or [`set_ns`](Self::set_ns) carries the time past their
/// deadline.
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

    /// How many `sleep_until` futures (or blocked threads) are waiting for time to move.
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn a_blocked_thread_wakes_when_time_passes_the_deadline() {
        let clock = ManualClock::new(0);
        let sleeper = std::thread::spawn({
            let clock = clock.clone();
            move || {
                clock.sleep_until_blocking(100);
                clock.now_ns()
            }
        });
        while clock.sleepers() == 0 {
            std::thread::yield_now();
        }
        clock.advance(Duration::from_nanos(99));
        assert!(!sleeper.is_finished());
        clock.advance(Duration::from_nanos(1));
        assert_eq!(sleeper.join().unwrap(), 100);
    }
}
