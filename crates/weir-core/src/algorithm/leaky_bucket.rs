//! Leaky bucket as a meter. Pure: maps (state, now, cost) to (decision, next state). Equivalent
//! Lua and memcached steps must agree with it (checked by `weir-testkit`).

use crate::decision::Decision;
use crate::time::until;

use super::Meter;

/// A bucket of `capacity` that drains one unit every `interval_ns`. A request adds `cost`
/// units if they fit, otherwise it is denied (the meter: nothing is queued).
///
/// State: `level` and `last_ns`, the instant of the last whole unit drained. Over any
/// interval of length `t` it admits at most `capacity + t / T` units; `retry_after` is exact:
/// `last + (level + cost − capacity)·T − now`. It is GCRA with the level kept explicitly.
///
/// Rule change: the level carries over (a level above a smaller new capacity drains first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeakyBucket {
    pub(crate) capacity: u64,
    pub(crate) interval_ns: u64,
}

/// Leaky bucket state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeakyBucketState {
    /// Units in the bucket at `last_ns`.
    pub level: u64,
    /// When the last whole unit drained.
    pub last_ns: u64,
}

impl LeakyBucket {
    /// The interval between two units, in nanoseconds.
    pub fn interval_ns(&self) -> u64 {
        self.interval_ns
    }
}

impl LeakyBucket {
    fn drain(&self, state: &LeakyBucketState, now_ns: u64) -> LeakyBucketState {
        let mut s = *state;
        if now_ns > s.last_ns {
            let drained = (now_ns - s.last_ns) / self.interval_ns;
            if drained >= s.level {
                s.level = 0;
                s.last_ns = now_ns;
            } else {
                s.level -= drained;
                s.last_ns += drained * self.interval_ns;
            }
        }
        s
    }

    fn empty_at_ns(&self, s: &LeakyBucketState) -> u64 {
        s.last_ns
            .saturating_add(s.level.saturating_mul(self.interval_ns))
    }
}

impl Meter for LeakyBucket {
    type State = LeakyBucketState;

    fn fresh(&self, now_ns: u64) -> LeakyBucketState {
        LeakyBucketState {
            level: 0,
            last_ns: now_ns,
        }
    }

    fn check(&self, state: &mut LeakyBucketState, now_ns: u64, cost: u64) -> Decision {
        let mut s = self.drain(state, now_ns);
        let want = cost.max(1);
        let room = self.capacity.saturating_sub(s.level);
        if want <= room {
            if cost > 0 {
                s.level += cost;
                *state = s;
            }
            Decision::allow(
                self.capacity,
                self.capacity - s.level,
                until(self.empty_at_ns(&s), now_ns),
            )
        } else {
            let excess = s.level.saturating_add(want) - self.capacity;
            Decision::deny(
                self.capacity,
                room,
                until(self.empty_at_ns(&s), now_ns),
                until(
                    s.last_ns
                        .saturating_add(excess.saturating_mul(self.interval_ns)),
                    now_ns,
                ),
            )
        }
    }

    fn penalize(&self, state: &mut LeakyBucketState, now_ns: u64, n: u64) {
        let mut s = self.drain(state, now_ns);
        s.level = s.level.saturating_add(n);
        *state = s;
    }

    fn reward(&self, state: &mut LeakyBucketState, now_ns: u64, n: u64) {
        let mut s = self.drain(state, now_ns);
        s.level = s.level.saturating_sub(n);
        if s.level == 0 {
            s.last_ns = s.last_ns.max(now_ns);
        }
        *state = s;
    }

    fn used(&self, state: &LeakyBucketState, now_ns: u64) -> u64 {
        self.drain(state, now_ns).level
    }

    fn fresh_at_ns(&self, state: &LeakyBucketState) -> u64 {
        self.empty_at_ns(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drains_at_the_rate() {
        let lb = LeakyBucket {
            capacity: 2,
            interval_ns: 10,
        };
        let mut s = lb.fresh(0);
        assert!(lb.check(&mut s, 0, 2).allowed);
        let d = lb.check(&mut s, 3, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after.as_nanos(), 7);
        assert!(lb.check(&mut s, 10, 1).allowed);
        assert_eq!(lb.used(&s, 10), 2);
    }
}
