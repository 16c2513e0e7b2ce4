//! GCRA (generic cell rate algorithm): the leaky-bucket meter kept as one timestamp.
//! Pure: maps (state, now, cost) to (decision, next state). The memory store runs it under a
//! shard lock; the Redis and memcached stores must stay equivalent (checked by `weir-testkit`).

use crate::decision::Decision;
use crate::time::until;

use super::{Meter, Ramped, WarmUp};

/// GCRA with emission interval `T` (one unit per `T`) and burst `B`.
///
/// State: the theoretical arrival time `TAT` (when the bucket would be empty). A request of
/// cost `n` at `now` is allowed iff `max(TAT, now) + n·T − now ≤ B·T`; then
/// `TAT ← max(TAT, now) + n·T`. Over any interval of length `t` it allows at most
/// `B + t / T` units, and a fresh key can take `B` at once. This is exactly governor's
/// `Quota` semantics (`max_burst = B`, `replenish_1_per = T`).
///
/// `retry_after` is exact: `max(TAT, now) + n·T − B·T − now`.
///
/// Rule change: `TAT` carries over, so the time debt a key owes is re-read under the new `T`
/// and `B` (a key that owed half its burst time still owes that time). Adding or removing
/// warm-up ([`WarmUp`]) is a change of state: the key starts fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gcra {
    pub(crate) burst: u64,
    pub(crate) interval_ns: u64,
    pub(crate) tolerance_ns: u64,
    pub(crate) warmup: Option<WarmUp>,
}

/// GCRA state: the theoretical arrival time, ns since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GcraState {
    /// Theoretical arrival time.
    pub tat_ns: u64,
}

impl Gcra {
    pub(crate) fn new(burst: u64, interval_ns: u64) -> Self {
        Self {
            burst,
            interval_ns,
            tolerance_ns: burst.saturating_mul(interval_ns),
            warmup: None,
        }
    }

    /// The emission interval `T` in nanoseconds.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }

    /// The burst `B`.
    pub fn burst(&self) -> u64 {
        self.burst
    }

    /// Whether a check of cost 1 would pass now on a key whose TAT is `tat_ns` (the key is
    /// not limited; the memory store may evict it).
    #[inline]
    pub(crate) fn allows_one_more(&self, tat_ns: u64, now_ns: u64) -> bool {
        tat_ns.max(now_ns).saturating_add(self.interval_ns) - now_ns <= self.tolerance_ns
    }

    fn remaining(&self, tat_ns: u64, now_ns: u64) -> u64 {
        self.tolerance_ns
            .saturating_sub(tat_ns.saturating_sub(now_ns))
            / self.interval_ns
    }
}

impl Meter for Gcra {
    type State = GcraState;

    fn fresh(&self, _now_ns: u64) -> GcraState {
        GcraState::default()
    }

    #[inline]
    fn check(&self, state: &mut GcraState, now_ns: u64, cost: u64) -> Decision {
        let tat = state.tat_ns.max(now_ns);
        let new_tat = tat.saturating_add(cost.max(1).saturating_mul(self.interval_ns));
        if new_tat - now_ns <= self.tolerance_ns {
            if cost == 0 {
                return Decision::allow(
                    self.burst,
                    self.remaining(tat, now_ns),
                    until(tat, now_ns),
                );
            }
            state.tat_ns = new_tat;
            Decision::allow(
                self.burst,
                self.remaining(new_tat, now_ns),
                until(new_tat, now_ns),
            )
        } else {
            Decision::deny(
                self.burst,
                self.remaining(tat, now_ns),
                until(tat, now_ns),
                until(new_tat - self.tolerance_ns, now_ns),
            )
        }
    }

    fn penalize(&self, state: &mut GcraState, now_ns: u64, n: u64) {
        state.tat_ns = state
            .tat_ns
            .max(now_ns)
            .saturating_add(n.saturating_mul(self.interval_ns));
    }

    fn reward(&self, state: &mut GcraState, now_ns: u64, n: u64) {
        state.tat_ns = state
            .tat_ns
            .saturating_sub(n.saturating_mul(self.interval_ns))
            .max(now_ns.min(state.tat_ns));
    }

    fn used(&self, state: &GcraState, now_ns: u64) -> u64 {
        crate::time::div_ceil(state.tat_ns.saturating_sub(now_ns), self.interval_ns)
    }

    fn fresh_at_ns(&self, state: &GcraState) -> u64 {
        state.tat_ns
    }
}

impl Ramped for Gcra {
    fn warmup(&self) -> Option<WarmUp> {
        self.warmup
    }

    fn unit_ns(&self) -> u64 {
        self.interval_ns
    }

    fn full_at_ns(&self, state: &GcraState) -> u64 {
        state.tat_ns
    }

    fn charge(&self, state: &mut GcraState, now_ns: u64, ns: u64) {
        state.tat_ns = state.tat_ns.max(now_ns).saturating_add(ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn burst_then_one_per_interval() {
        let gcra = Gcra::new(3, 100 * MS);
        let mut s = gcra.fresh(0);
        let now = 1_000 * MS;
        for left in [2, 1, 0] {
            let d = gcra.check(&mut s, now, 1);
            assert!(d.allowed);
            assert_eq!(d.remaining, left);
        }
        let d = gcra.check(&mut s, now, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after.as_nanos(), u128::from(100 * MS));
        assert!(!gcra.check(&mut s, now + 100 * MS - 1, 1).allowed);
        assert!(gcra.check(&mut s, now + 100 * MS, 1).allowed);
    }

    #[test]
    fn an_older_timestamp_mints_nothing() {
        let gcra = Gcra::new(1, 100 * MS);
        let mut s = gcra.fresh(0);
        assert!(gcra.check(&mut s, 1_000 * MS, 1).allowed);
        assert!(!gcra.check(&mut s, 900 * MS, 1).allowed);
    }

    #[test]
    fn reward_gives_time_back_but_not_into_the_past() {
        let gcra = Gcra::new(2, 100 * MS);
        let mut s = gcra.fresh(0);
        gcra.check(&mut s, 1_000 * MS, 2);
        assert_eq!(gcra.used(&s, 1_000 * MS), 2);
        gcra.reward(&mut s, 1_000 * MS, 5);
        assert_eq!(s.tat_ns, 1_000 * MS);
        assert_eq!(gcra.used(&s, 1_000 * MS), 0);
    }
}
