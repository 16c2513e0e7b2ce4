//! The keyless limiter: one rule, one budget, no store. What governor calls a direct rate
//! limiter: a process-wide limit (calls to a paid API, a log line, a background job) where
//! a key, its hash and a table would be the whole cost.
//!
//! Where this sits in a decision: [`DirectLimiter::check_now`] reads `now` from its
//! [`Clock`] once, decodes its one atomic word ([`WordMeter`]: GCRA's TAT, a token bucket
//! that starts full, a fixed window's count and window), runs the algorithm's own step on
//! it (`Meter::check`, the one Rust copy every store runs) and writes the new word with one
//! 8-byte compare-and-swap; a denial (or a peek) writes nothing: a plain read.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::sync::wait_blocking_on;
use crate::clock::{Clock, SystemClock};
use crate::decision::Decision;
use crate::error::{CheckError, RuleError};
use crate::rule::Rule;
use crate::step::{validate, Op};
use crate::store::WordMeter;

/// The state word on a cache line of its own, so two limiters (or a limiter and whatever
/// the program puts beside it) never share the line it writes.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Word(AtomicU64);

/// A limiter for one rule and no key: one budget for the whole program, decided without a
/// lock by one 8-byte compare-and-swap (a denial is one load). Synchronous: no runtime.
///
/// It takes the rules whose state is one word: GCRA (`Rule::per_second`, `Rule::gcra`, …),
/// a token bucket that starts full (the default) and a fixed window, without a lockout.
/// Its decisions are exactly those of [`Limiter`](crate::Limiter) on one key (the same step
/// on the same state), and under GCRA exactly governor's direct limiter's.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{DirectLimiter, ManualClock, Rule};
///
/// let clock = ManualClock::new(0);
/// // 2 per second, as a burst of 2: one budget for every caller of `send_alert`.
/// let alerts = DirectLimiter::with_clock(Rule::per_second(2)?, clock.clone())?;
/// assert!(alerts.check_now()?.allowed);
/// assert!(alerts.check_now()?.allowed);
/// let denied = alerts.check_now()?;
/// assert!(!denied.allowed);
/// assert_eq!(denied.retry_after, Duration::from_millis(500));
///
/// clock.advance(Duration::from_millis(500));
/// assert!(alerts.check_now()?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Share it across threads by reference or in an `Arc`; [`DirectLimiter::new`] reads the
/// [`SystemClock`].
#[derive(Debug)]
pub struct DirectLimiter<C = SystemClock> {
    word: Word,
    meter: WordMeter,
    rule: Rule,
    clock: C,
}

impl DirectLimiter {
    /// A limiter for `rule` on the system clock. Refuses a rule whose state is more than
    /// one word (see [`with_clock`](Self::with_clock)).
    pub fn new(rule: Rule) -> Result<Self, RuleError> {
        Self::with_clock(rule, SystemClock::new())
    }
}

impl<C: Clock> DirectLimiter<C> {
    /// A limiter for `rule`, reading time from `clock`. `Err(RuleError::Inconsistent)` for
    /// a rule whose state is more than one word: a sliding window or log, a weighted window
    /// whose limit and window do not fit one word, a leaky bucket,
    /// a queue, leases, a token bucket with fewer initial tokens than its capacity, a rule
    /// with a lockout (use a [`Limiter`](crate::Limiter) and one key for those).
    pub fn with_clock(rule: Rule, clock: C) -> Result<Self, RuleError> {
        let meter = WordMeter::of(&rule).ok_or(RuleError::Inconsistent {
            param: "algorithm",
            reason: "a direct limiter takes GCRA, a token bucket that starts full, a fixed \
                     window or a weighted window, without a lockout",
        })?;
        Ok(Self {
            word: Word::default(),
            meter,
            rule,
            clock,
        })
    }

    /// The rule.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }

    /// The clock.
    pub fn clock(&self) -> &C {
        &self.clock
    }

    /// Checks a request of cost 1 now and consumes it if allowed. The same shape as
    /// [`KeyedLimiter::check_now`](crate::KeyedLimiter::check_now) and
    /// [`Limiter::check_now`](crate::Limiter::check_now) (a denial is an `Ok` decision);
    /// this one never fails, as every rule allows at least one unit and there is no store.
    #[inline]
    pub fn check_now(&self) -> Result<Decision, CheckError> {
        Ok(self.decide(1))
    }

    /// Checks a request of `cost` units now and consumes them if allowed (`cost == 0` is a
    /// peek). A cost above the rule's limit is [`CheckError::CostAboveCapacity`].
    #[inline]
    pub fn check_n_now(&self, cost: u64) -> Result<Decision, CheckError> {
        validate(&self.rule, &Op::Check { cost })?;
        Ok(self.decide(cost))
    }

    /// Whether a request of cost 1 would pass now, consuming nothing (never fails).
    pub fn peek_now(&self) -> Result<Decision, CheckError> {
        Ok(self.decide(0))
    }

    /// Forgets all usage: the limiter is as new.
    pub fn reset(&self) {
        self.word.0.store(0, Ordering::Relaxed);
    }

    /// Waits until a request of `cost` is allowed, then consumes it, blocking the calling
    /// thread ([`Clock::sleep_until_blocking`]: it sleeps, never spins); gives up (returning
    /// the denial) when that would take longer than `max_wait`. Never call it from async
    /// code.
    pub fn wait_blocking(&self, cost: u64, max_wait: Duration) -> Result<Decision, CheckError> {
        wait_blocking_on(&self.clock, max_wait, || self.check_n_now(cost))
    }

    /// One step on the word, at one reading of the clock. The word is only ever replaced by
    /// a compare-and-swap from the value the step read, so no update is lost; `Relaxed` is
    /// enough, as the word guards nothing but itself.
    #[inline]
    fn decide(&self, cost: u64) -> Decision {
        let now_ns = self.clock.now_ns();
        let mut seen = self.word.0.load(Ordering::Relaxed);
        loop {
            let (decision, next) = self.meter.check(seen, now_ns, cost);
            if next == seen {
                return decision; // a denial or a peek: nothing to write
            }
            match self.word.0.compare_exchange_weak(
                seen,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return decision,
                Err(current) => seen = current,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn refuses_rules_of_more_than_one_word() {
        let s = Duration::from_secs(1);
        assert!(DirectLimiter::new(Rule::sliding_log(5, s).unwrap()).is_err());
        assert!(DirectLimiter::new(Rule::concurrency(5).unwrap()).is_err());
        assert!(DirectLimiter::new(Rule::fixed_window(5, s).unwrap()).is_ok());
        assert!(DirectLimiter::new(Rule::token_bucket(5, 5, s).unwrap()).is_ok());
    }

    #[test]
    fn costs_peeks_and_reset() {
        let clock = ManualClock::new(1_000_000_000);
        let limiter = DirectLimiter::with_clock(
            Rule::fixed_window(3, Duration::from_secs(1)).unwrap(),
            clock,
        )
        .unwrap();
        assert!(matches!(
            limiter.check_n_now(4),
            Err(CheckError::CostAboveCapacity {
                cost: 4,
                capacity: 3
            })
        ));
        assert!(limiter.check_n_now(2).unwrap().allowed);
        assert_eq!(limiter.peek_now().unwrap().remaining, 1);
        assert!(!limiter.check_n_now(2).unwrap().allowed);
        assert!(limiter.check_now().unwrap().allowed);
        assert!(!limiter.peek_now().unwrap().allowed);
        limiter.reset();
        assert_eq!(limiter.peek_now().unwrap().remaining, 3);
    }

    #[test]
    fn wait_blocking_sleeps_until_retry_after_and_gives_up_past_max_wait() {
        let clock = ManualClock::new(1_000_000_000);
        let limiter =
            DirectLimiter::with_clock(Rule::per_second(1).unwrap(), clock.clone()).unwrap();
        assert!(limiter.check_now().unwrap().allowed);
        let gave_up = limiter
            .wait_blocking(1, Duration::from_millis(999))
            .unwrap();
        assert!(!gave_up.allowed, "a wait of 1 s does not fit in 999 ms");
        std::thread::scope(|s| {
            let waiter = s.spawn(|| limiter.wait_blocking(1, Duration::from_secs(2)));
            while clock.sleepers() == 0 {
                std::thread::yield_now();
            }
            clock.advance(Duration::from_secs(1));
            assert!(waiter.join().unwrap().unwrap().allowed);
        });
    }
}
