//! [`SystemClock`], the production clock: reads the process's time line (`timeline.rs`) and
//! sleeps on tokio's timer inside a tokio runtime, on the helper thread of `timer.rs` outside
//! one, and by sleeping the thread when asked to block.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::timeline::{timeline, Timeline};
use super::timer::TimerSleep;
use super::{Clock, Sleep};

/// The production clock: nanoseconds since the Unix epoch, about 10 ns a read, never going
/// backwards.
///
/// It reads the CPU's time stamp counter (through `quanta`, as governor does), held to a
/// reference: a monotonic clock (`std::time::Instant`) anchored once to the wall clock, so it
/// counts from the Unix epoch but a wall-clock step (NTP, an operator) never moves it. The
/// counter is re-anchored to the reference every millisecond, only ever forwards: the clock
/// reads at most 2 ms ahead of the reference, and behind it by about a microsecond (a few,
/// when a thread is descheduled mid-anchoring). Instances on machines whose wall clocks
/// agree agree as closely, which is what stores shared between instances (Redis,
/// memcached) need. Where the CPU has no invariant counter, it reads the monotonic clock.
///
/// All `SystemClock`s of a process share one time line, started by the first (calibrating
/// the counter takes 10 to 20 ms, at most 200 ms); clones and later instances are free.
///
/// Sleeping ([`sleep_until`](Clock::sleep_until)): inside a tokio runtime (feature `tokio`,
/// on by default), tokio's timer, so the runtime must have its timer enabled
/// (`enable_time`); under any other executor, or without the feature, a helper thread,
/// `weir-timer`, started on first use, wakes the sleep. Either way the sleep never spins.
/// [`sleep_until_blocking`](Clock::sleep_until_blocking) sleeps the calling thread.
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    timeline: &'static Timeline,
}

impl SystemClock {
    /// The process's clock (the first call starts its time line).
    pub fn new() -> Self {
        Self {
            timeline: timeline(),
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
        self.timeline.now_ns()
    }

    fn sleep_until(&self, deadline_ns: u64) -> Sleep {
        Box::pin(SystemSleep {
            clock: *self,
            deadline_ns,
            timer: Timer::Unarmed,
        })
    }

    fn sleep_until_blocking(&self, deadline_ns: u64) {
        while let Some(left) = self.left(deadline_ns) {
            std::thread::sleep(left);
        }
    }
}

impl SystemClock {
    /// Time left until `deadline_ns`, `None` once it has come.
    fn left(&self, deadline_ns: u64) -> Option<Duration> {
        let left_ns = deadline_ns.checked_sub(self.now_ns())?;
        (left_ns > 0).then(|| Duration::from_nanos(left_ns))
    }
}

/// A sleep on the system clock. Armed on first poll, on the timer of whatever runs it; when
/// a timer fires before `now_ns` has reached the deadline (the clock runs a little behind
/// the timers' monotonic clock), it is armed again for what is left.
struct SystemSleep {
    clock: SystemClock,
    deadline_ns: u64,
    timer: Timer,
}

enum Timer {
    Unarmed,
    #[cfg(feature = "tokio")]
    Tokio(Pin<Box<tokio::time::Sleep>>),
    Thread(TimerSleep),
}

impl Timer {
    /// A timer firing after `left`, on tokio's timer inside a tokio runtime, else on the
    /// helper thread. If that thread cannot start, the thread polling sleeps (blocking its
    /// executor for `left`, the last resort that still never spins).
    #[allow(clippy::disallowed_methods)] // the helper thread's deadline, on its clock
    fn arm(left: Duration, cx: &Context<'_>) -> Self {
        #[cfg(feature = "tokio")]
        if tokio::runtime::Handle::try_current().is_ok() {
            return Self::Tokio(Box::pin(tokio::time::sleep(left)));
        }
        match TimerSleep::register(Instant::now() + left, cx.waker()) {
            Some(sleep) => Self::Thread(sleep),
            None => {
                std::thread::sleep(left);
                Self::Unarmed
            }
        }
    }

    /// Whether the timer has fired (an unarmed one has).
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match self {
            Self::Unarmed => Poll::Ready(()),
            #[cfg(feature = "tokio")]
            Self::Tokio(sleep) => sleep.as_mut().poll(cx),
            Self::Thread(sleep) => sleep.poll(cx),
        }
    }
}

impl Future for SystemSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        loop {
            if this.timer.poll(cx).is_pending() {
                return Poll::Pending;
            }
            let Some(left) = this.clock.left(this.deadline_ns) else {
                return Poll::Ready(());
            };
            this.timer = Timer::arm(left, cx);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_counts_from_the_epoch_and_never_goes_back() {
        let clock = SystemClock::new();
        let a = clock.now_ns();
        let b = SystemClock::new().now_ns();
        assert!(a > 1_600_000_000_000_000_000, "{a} is not after 2020");
        assert!(b >= a, "two system clocks share one time line");
    }

    #[test]
    fn a_blocking_sleep_sleeps_until_the_deadline() {
        let clock = SystemClock::new();
        let deadline = clock.now_ns() + 2_000_000;
        clock.sleep_until_blocking(deadline);
        assert!(clock.now_ns() >= deadline);
    }

    #[tokio::test]
    async fn a_sleep_inside_tokio_ends_at_the_deadline() {
        let clock = SystemClock::new();
        let deadline = clock.now_ns() + 2_000_000;
        clock.sleep_until(deadline).await;
        assert!(clock.now_ns() >= deadline);
    }

    #[test]
    fn a_sleep_outside_tokio_wakes_from_the_timer_thread() {
        let clock = SystemClock::new();
        let deadline = clock.now_ns() + 2_000_000;
        let ((), polls) = super::super::contract::drive(clock.sleep_until(deadline));
        assert!(clock.now_ns() >= deadline);
        // Armed, woken, perhaps armed again for the last microseconds: a spinning sleep
        // would be polled thousands of times in 2 ms.
        assert!(polls <= 10, "{polls} polls: the sleep spun");
    }
}
