//! A rule's lockout: how long a key that hit its limit stays blocked, how that escalates
//! for repeat offenders and when its strikes are forgiven. Built and validated with the
//! rule (`rule.rs`); applied by the pure step (`step.rs`), which engages it on a denial.

use std::time::Duration;

use crate::error::RuleError;
use crate::time::duration_ns;

use super::{span, MAX_SPAN};

/// Lock a key out for a while once it hits its limit, escalating for repeat offenders.
///
/// The first denied check blocks the key for `duration`; each further lockout before the
/// strikes are forgiven doubles it (`D, 2D, 4D, …`) up to `max`. Strikes are forgotten
/// `forgive_after` after the last lockout ends (default 24 hours). `Limiter::reset` clears
/// the count and the strikes (the "successful login" case); `unblock` lifts the lockout,
/// forgives the strikes and clears the count (the operator's "let them try again").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lockout {
    pub(crate) base_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) forgive_ns: u64,
}

impl Lockout {
    /// A lockout of `duration` that does not escalate.
    pub fn new(duration: Duration) -> Result<Self, RuleError> {
        let base_ns = span("lockout.duration", duration)?;
        Ok(Self {
            base_ns,
            max_ns: base_ns,
            forgive_ns: duration_ns(Duration::from_secs(24 * 3600)),
        })
    }

    /// Escalates: each repeat doubles the lockout, up to `max`.
    pub fn escalating(mut self, max: Duration) -> Result<Self, RuleError> {
        let max_ns = span("lockout.max", max)?;
        if max_ns < self.base_ns {
            return Err(RuleError::Inconsistent {
                param: "lockout.max",
                reason: "must be at least lockout.duration",
            });
        }
        self.max_ns = max_ns;
        Ok(self)
    }

    /// Forgets strikes this long after the last lockout ends (at most [`MAX_SPAN`]).
    pub fn forgive_after(mut self, after: Duration) -> Self {
        self.forgive_ns = duration_ns(after.min(MAX_SPAN));
        self
    }

    /// The first lockout's length.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.base_ns)
    }

    /// The longest a lockout escalates to (equal to [`duration`](Self::duration) when it
    /// does not escalate).
    pub fn max_duration(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// How long after the last lockout ends its strikes are forgotten.
    pub fn forgiven_after(&self) -> Duration {
        Duration::from_nanos(self.forgive_ns)
    }

    /// The lockout for a key that has served `strikes` lockouts already.
    pub(crate) fn duration_ns(&self, strikes: u32) -> u64 {
        let factor = 1u64.checked_shl(strikes.min(63)).unwrap_or(u64::MAX);
        self.base_ns.saturating_mul(factor).min(self.max_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockout_escalates_up_to_its_cap() {
        let l = Lockout::new(Duration::from_secs(60))
            .unwrap()
            .escalating(Duration::from_secs(300))
            .unwrap();
        let mins: Vec<u64> = (0..5).map(|k| l.duration_ns(k) / 60_000_000_000).collect();
        assert_eq!(mins, [1, 2, 4, 5, 5]);
        assert!(Lockout::new(Duration::ZERO).is_err());
    }
}
