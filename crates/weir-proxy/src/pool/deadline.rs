//! A connection's one timer for the upstream timeout ([`Deadline`]): each request on the
//! connection brings its own deadline (the clock's nanoseconds), but the timer under it is
//! armed once and re-armed only when it fires before the request's deadline, not once per
//! request. A busy keep-alive connection whose requests each take less than the timeout
//! re-arms it about once a timeout (30 s by default), however many requests it carries;
//! a per-request `tokio::time::timeout` registered and removed a timer in the runtime's
//! wheel for every request, and woke the timer driver when the wheel was empty.
//!
//! Polled by `exchange.rs` inside the connection's relay (`conn.rs`), so a timer that fires
//! while the connection is idle in the pool wakes no one.

use std::task::{Context, Poll};

use weir_core::{Clock, Sleep};

/// The timer of one connection, shared by the requests it carries one after the other.
#[derive(Default)]
pub(super) struct Deadline {
    /// The timer, and the clock's nanoseconds it fires at (armed on first use).
    timer: Option<(Sleep, u64)>,
    /// How many times a timer was armed (for the tests that pin "not once a request").
    arms: u64,
}

impl std::fmt::Debug for Deadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deadline")
            .field("fires_at_ns", &self.timer.as_ref().map(|(_, at)| at))
            .field("arms", &self.arms)
            .finish()
    }
}

impl Deadline {
    /// Ready once `clock` has reached `deadline_ns`; pending otherwise, with the timer
    /// armed to wake `cx` no later than then. A timer armed for an earlier time (an
    /// earlier request's deadline) is kept and re-armed when it fires; one armed for a
    /// later time is re-armed now.
    pub(super) fn poll(
        &mut self,
        clock: &impl Clock,
        deadline_ns: u64,
        cx: &mut Context<'_>,
    ) -> Poll<()> {
        loop {
            if clock.now_ns() >= deadline_ns {
                return Poll::Ready(());
            }
            let timer = match &mut self.timer {
                Some((sleep, at)) if *at <= deadline_ns => sleep,
                slot => {
                    self.arms += 1;
                    &mut slot.insert((clock.sleep_until(deadline_ns), deadline_ns)).0
                }
            };
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            // Fired for an earlier deadline: armed again for this one, or ready.
            self.timer = None;
        }
    }

    /// How many times a timer was armed.
    #[cfg(test)]
    pub(super) fn arms(&self) -> u64 {
        self.arms
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::task::{Wake, Waker};
    use std::time::Duration;

    use weir_core::ManualClock;

    use super::*;

    struct Noop;
    impl Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn one_timer_serves_the_requests_of_a_connection_and_is_re_armed_only_when_it_fires() {
        let clock = ManualClock::default();
        let waker = Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        let mut deadline = Deadline::default();
        let sec = 1_000_000_000;
        let start = clock.now_ns();
        // A hundred requests, each answered within the timeout: one timer.
        for i in 0..100u64 {
            let due = start + 30 * sec + i * 1_000_000;
            assert!(deadline.poll(&clock, due, &mut cx).is_pending());
            clock.advance(Duration::from_millis(1));
        }
        assert_eq!(deadline.arms(), 1);
        // The first timer fires (30 s after the first request): armed once more for the
        // request now waiting, which is not due yet.
        let due = clock.now_ns() + 30 * sec;
        clock.advance(Duration::from_secs(29) + Duration::from_millis(900));
        assert!(deadline.poll(&clock, due, &mut cx).is_pending());
        assert_eq!(deadline.arms(), 2);
        // Its own deadline comes: ready.
        clock.advance(Duration::from_millis(100));
        assert!(deadline.poll(&clock, due, &mut cx).is_ready());
        // A deadline before the armed timer's (a shorter timeout) re-arms it at once.
        let soon = clock.now_ns() + sec;
        assert!(deadline.poll(&clock, soon + 30 * sec, &mut cx).is_pending());
        assert!(deadline.poll(&clock, soon, &mut cx).is_pending());
        clock.advance(Duration::from_secs(1));
        assert!(deadline.poll(&clock, soon, &mut cx).is_ready());
    }
}
