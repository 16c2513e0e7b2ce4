//! Leaky bucket as a queue (traffic shaping). Pure: maps (state, now, cost) to (decision with
//! a delay, next state). Equivalent Lua and memcached steps must agree with it.

use std::time::Duration;

use crate::decision::Decision;
use crate::time::until;

use super::Meter;

/// Requests are scheduled to leave at a constant rate, one unit every `interval_ns`. An
/// allowed request is told how long to wait ([`Decision::delay`]) before it goes, so the
/// output never exceeds the rate even when the input bursts.
///
/// State: `next_free_ns`, when the next unit may leave. A request of cost `n` at `now`
/// starts at `s = max(next_free, now)`, waits `s − now`, and moves `next_free` to `s + n·T`.
/// The queue is bounded two ways: the units waiting ahead plus this request must fit in
/// `max_depth` (`⌈(s − now)/T⌉ + n ≤ max_depth`), and the wait must not exceed `max_wait`.
/// Beyond either bound the request is denied and nothing is queued; `retry_after` is the
/// exact instant both bounds would hold again.
///
/// Rule change: `next_free` carries over; waits already promised are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeakyQueue {
    pub(crate) interval_ns: u64,
    pub(crate) max_depth: u64,
    pub(crate) max_wait_ns: u64,
}

/// Leaky queue state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeakyQueueState {
    /// When the next unit may leave.
    pub next_free_ns: u64,
}

impl LeakyQueue {
    /// The interval between two units, in nanoseconds.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// The maximum wait in nanoseconds (`u64::MAX`: unbounded).
    pub fn max_wait_ns(&self) -> u64 {
        self.max_wait_ns
    }
}

impl LeakyQueue {
    fn queued(&self, next_free_ns: u64, now_ns: u64) -> u64 {
        crate::time::div_ceil(next_free_ns.saturating_sub(now_ns), self.interval_ns)
    }
}

impl Meter for LeakyQueue {
    type State = LeakyQueueState;

    fn fresh(&self, _now_ns: u64) -> LeakyQueueState {
        LeakyQueueState::default()
    }

    fn check(&self, state: &mut LeakyQueueState, now_ns: u64, cost: u64) -> Decision {
        let want = cost.max(1);
        let start_ns = state.next_free_ns.max(now_ns);
        let wait_ns = start_ns - now_ns;
        let ahead = self.queued(start_ns, now_ns);
        let fits = ahead.saturating_add(want) <= self.max_depth && wait_ns <= self.max_wait_ns;
        if fits {
            let next_ns = start_ns.saturating_add(want.saturating_mul(self.interval_ns));
            if cost > 0 {
                state.next_free_ns = next_ns;
            }
            let after = if cost > 0 { next_ns } else { start_ns };
            let mut d = Decision::allow(
                self.max_depth,
                self.max_depth.saturating_sub(self.queued(after, now_ns)),
                until(after, now_ns),
            );
            d.delay = Duration::from_nanos(wait_ns);
            d
        } else {
            let depth_ok_ns =
                start_ns.saturating_sub((self.max_depth - want).saturating_mul(self.interval_ns));
            let wait_ok_ns = start_ns.saturating_sub(self.max_wait_ns);
            Decision::deny(
                self.max_depth,
                self.max_depth.saturating_sub(ahead),
                until(start_ns, now_ns),
                until(depth_ok_ns.max(wait_ok_ns), now_ns),
            )
        }
    }

    fn penalize(&self, state: &mut LeakyQueueState, now_ns: u64, n: u64) {
        state.next_free_ns = state
            .next_free_ns
            .max(now_ns)
            .saturating_add(n.saturating_mul(self.interval_ns));
    }

    fn reward(&self, state: &mut LeakyQueueState, now_ns: u64, n: u64) {
        if state.next_free_ns > now_ns {
            state.next_free_ns = state
                .next_free_ns
                .saturating_sub(n.saturating_mul(self.interval_ns))
                .max(now_ns);
        }
    }

    fn used(&self, state: &LeakyQueueState, now_ns: u64) -> u64 {
        self.queued(state.next_free_ns, now_ns)
    }

    fn fresh_at_ns(&self, state: &LeakyQueueState) -> u64 {
        state.next_free_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_spread_at_the_rate_and_the_queue_is_bounded() {
        let q = LeakyQueue {
            interval_ns: 100,
            max_depth: 3,
            max_wait_ns: u64::MAX,
        };
        let mut s = q.fresh(0);
        let delays: Vec<u128> = (0..3)
            .map(|_| q.check(&mut s, 1_000, 1))
            .map(|d| {
                assert!(d.allowed);
                d.delay.as_nanos()
            })
            .collect();
        assert_eq!(delays, [0, 100, 200]);
        let d = q.check(&mut s, 1_000, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after.as_nanos(), 100);
        assert!(!q.check(&mut s, 1_099, 1).allowed);
        assert_eq!(q.check(&mut s, 1_100, 1).delay.as_nanos(), 200);
    }

    #[test]
    fn max_wait_bounds_the_delay() {
        let q = LeakyQueue {
            interval_ns: 100,
            max_depth: 100,
            max_wait_ns: 150,
        };
        let mut s = q.fresh(0);
        assert!(q.check(&mut s, 0, 1).allowed);
        assert!(q.check(&mut s, 0, 1).allowed);
        let d = q.check(&mut s, 0, 1);
        assert!(!d.allowed, "would wait 200 ns > 150");
        assert_eq!(d.retry_after.as_nanos(), 50);
    }
}
