//! The wait logic, once: after each answer of a bounded wait, go now, go at the
//! leaky-bucket queue's delay, try again at `retry_after`, or give up because the next try
//! would come past the deadline. Pure arithmetic on `now`; the caller sleeps.
//!
//! Where this sits in a decision: every wait for permission steps through [`Wait::after`] —
//! [`Limiter::wait`](crate::Limiter::wait), the blocking waits of the sync, direct and keyed
//! limiters (`limiter/sync.rs`), and the tower layer's queue (`weir-tower`'s `service.rs`),
//! whose answer covers several limits at once ([`Paced`] reads it).

use std::time::Duration;

use crate::decision::Decision;
use crate::time::duration_ns;

/// The shortest retry: a zero `retry_after` must never become a busy loop.
const MIN_RETRY_NS: u64 = 1_000;

/// What a wait reads of an answer: whether it allowed, the leaky-bucket queue's pacing
/// delay, and when a denied request could pass. A [`Decision`] is one; so is an answer
/// over several limits (the tower layer's, with the longest delay and `retry_after`).
pub trait Paced {
    /// Whether the request may go (after [`delay`](Self::delay)).
    fn allowed(&self) -> bool;
    /// How long an allowed request is held before it goes (zero but for the queue).
    fn delay(&self) -> Duration;
    /// When denied: the earliest time after which the request would pass.
    fn retry_after(&self) -> Duration;
}

impl Paced for Decision {
    #[inline]
    fn allowed(&self) -> bool {
        self.allowed
    }
    #[inline]
    fn delay(&self) -> Duration {
        self.delay
    }
    #[inline]
    fn retry_after(&self) -> Duration {
        self.retry_after
    }
}

/// What a wait does after an answer, at clock readings in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStep {
    /// Allowed: go now.
    Go,
    /// Allowed with a delay: go at this time.
    GoAt(u64),
    /// Denied: sleep until this time, then ask again.
    RetryAt(u64),
    /// Denied, and the next try would come after the deadline: give up now.
    GiveUp,
}

/// A wait for permission that gives up at a deadline.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{DirectLimiter, ManualClock, Rule, Wait, WaitStep};
///
/// let clock = ManualClock::new(0);
/// let limiter = DirectLimiter::with_clock(Rule::per_second(1)?, clock.clone())?;
/// let wait = Wait::new(0, Duration::from_secs(2));
/// assert_eq!(wait.after(&limiter.check_now()?, 0), WaitStep::Go);
/// // Denied: the next turn is 1 s away, inside the 2 s the wait may last.
/// assert_eq!(wait.after(&limiter.check_now()?, 0), WaitStep::RetryAt(1_000_000_000));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    deadline_ns: u64,
}

impl Wait {
    /// A wait starting at `now_ns` that lasts at most `max_wait`.
    pub fn new(now_ns: u64, max_wait: Duration) -> Self {
        Self {
            deadline_ns: now_ns.saturating_add(duration_ns(max_wait)),
        }
    }

    /// When the wait gives up.
    pub fn deadline_ns(&self) -> u64 {
        self.deadline_ns
    }

    /// What to do after `answer`, read at `now_ns`: a denial is retried at `now +
    /// retry_after` (at least 1 µs on), unless that is past the deadline.
    #[inline]
    pub fn after(&self, answer: &impl Paced, now_ns: u64) -> WaitStep {
        if answer.allowed() {
            let delay = answer.delay();
            return if delay.is_zero() {
                WaitStep::Go
            } else {
                WaitStep::GoAt(now_ns.saturating_add(duration_ns(delay)))
            };
        }
        let retry_ns = now_ns.saturating_add(duration_ns(answer.retry_after()).max(MIN_RETRY_NS));
        if retry_ns > self.deadline_ns {
            WaitStep::GiveUp
        } else {
            WaitStep::RetryAt(retry_ns)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn denied(retry_after: Duration) -> Decision {
        Decision {
            allowed: false,
            limit: 1,
            remaining: 0,
            reset_after: retry_after,
            retry_after,
            delay: Duration::ZERO,
        }
    }

    #[test]
    fn retries_at_retry_after_up_to_the_deadline_inclusive() {
        let wait = Wait::new(100, Duration::from_nanos(1_000_000));
        let d = denied(Duration::from_nanos(999_999));
        assert_eq!(wait.after(&d, 101), WaitStep::RetryAt(1_000_100));
        assert_eq!(
            wait.after(&d, 102),
            WaitStep::GiveUp,
            "1 ns past the deadline"
        );
    }

    #[test]
    fn a_zero_retry_after_waits_a_microsecond_and_delays_go_later() {
        let wait = Wait::new(0, Duration::from_secs(1));
        assert_eq!(
            wait.after(&denied(Duration::ZERO), 5),
            WaitStep::RetryAt(1_005)
        );
        let mut paced = denied(Duration::ZERO);
        paced.allowed = true;
        assert_eq!(wait.after(&paced, 5), WaitStep::Go);
        paced.delay = Duration::from_nanos(20);
        assert_eq!(wait.after(&paced, 5), WaitStep::GoAt(25));
        // An allowed answer goes, deadline or not.
        assert_eq!(
            Wait::new(0, Duration::ZERO).after(&paced, 5),
            WaitStep::GoAt(25)
        );
    }
}
