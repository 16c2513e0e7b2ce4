//! Sliding window log and sliding window counter: one implementation, because a log is a
//! counter whose buckets are 1 ns wide. Pure: maps (state, now, cost) to (decision, next
//! state). Equivalent Lua and memcached steps must agree with it.

use std::collections::VecDeque;

use crate::decision::Decision;
use crate::time::until;

use super::Meter;

/// A sliding window of length `W` counted in buckets of width `P` (the precision).
///
/// State: a list of `(bucket_start_ns, count)` for the non-empty buckets, oldest first, and
/// their total. A hit at `t` lands in the bucket starting at `⌊t/P⌋·P` and stops counting at
/// `bucket_start + W`. A request of cost `n` is allowed iff the counted units plus `n` fit in
/// `limit`.
///
/// **Sliding log** (`P` = 1 ns, [`Rule::sliding_log`](crate::Rule::sliding_log)): exact. At
/// most `limit` units in any window `[t, t + W)`. Memory: 16 bytes per admitted request
/// (requests with the same timestamp share an entry), at most `limit` entries, so the limit
/// is capped at [`Sliding::MAX_LOG_LIMIT`]; use the counter for larger limits.
///
/// **Sliding window counter** (`P` divides `W`,
/// [`Rule::sliding_window`](crate::Rule::sliding_window)): a hit stops counting up to `P`
/// early (at the end of its bucket's window, not its own). Bound: at most `limit` units in
/// any `W/P` consecutive aligned buckets, hence in any window of length `W − P`; any window of
/// length `W` holds at most `limit` plus the units admitted in one bucket. Memory: 16 bytes
/// per non-empty bucket, at most `W/P` buckets (capped at [`Sliding::MAX_BUCKETS`]).
///
/// `retry_after` is exact: the instant enough of the oldest buckets stop counting.
///
/// Rule change: buckets carry over and stop counting `W` (the new window) after they
/// started; a new precision applies to new hits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sliding {
    pub(crate) limit: u64,
    pub(crate) window_ns: u64,
    pub(crate) precision_ns: u64,
}

/// Sliding window state: non-empty buckets, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SlidingState {
    /// `(bucket_start_ns, count)`, oldest first.
    pub buckets: VecDeque<(u64, u64)>,
    /// Sum of the counts in `buckets`.
    pub total: u64,
}

impl Sliding {
    /// The largest limit of a sliding log (one 16-byte entry per admitted request).
    pub const MAX_LOG_LIMIT: u64 = 10_000;
    /// The most buckets a sliding window counter may have (`window / precision`).
    pub const MAX_BUCKETS: u64 = 10_000;

    /// The bucket width (1 ns for a sliding log).
    pub fn precision_ns(&self) -> u64 {
        self.precision_ns
    }

    fn max_entries(&self) -> usize {
        let by_buckets = self.window_ns / self.precision_ns;
        usize::try_from(self.limit.min(by_buckets).max(1)).unwrap_or(usize::MAX)
    }

    /// Drops the buckets that no longer count at `now_ns`.
    fn prune(&self, state: &mut SlidingState, now_ns: u64) {
        while let Some(&(start, count)) = state.buckets.front() {
            if start.saturating_add(self.window_ns) > now_ns {
                break;
            }
            state.total -= count;
            state.buckets.pop_front();
        }
    }

    fn counted(&self, state: &SlidingState, now_ns: u64) -> u64 {
        state
            .buckets
            .iter()
            .filter(|(start, _)| start.saturating_add(self.window_ns) > now_ns)
            .map(|(_, count)| count)
            .sum()
    }

    fn add(&self, state: &mut SlidingState, now_ns: u64, n: u64) {
        let mut start = now_ns - now_ns % self.precision_ns;
        let full = state.buckets.len() >= self.max_entries();
        if let Some(back) = state.buckets.back_mut() {
            // A lagging clock counts into the newest bucket, never an older one.
            start = start.max(back.0);
            if back.0 == start || full {
                back.0 = start;
                back.1 = back.1.saturating_add(n);
                state.total = state.total.saturating_add(n);
                return;
            }
        }
        state.buckets.push_back((start, n));
        state.total = state.total.saturating_add(n);
    }

    fn empty_at_ns(&self, state: &SlidingState) -> u64 {
        state
            .buckets
            .back()
            .map_or(0, |(start, _)| start.saturating_add(self.window_ns))
    }
}

impl Meter for Sliding {
    type State = SlidingState;

    fn fresh(&self, _now_ns: u64) -> SlidingState {
        SlidingState::default()
    }

    fn check(&self, state: &mut SlidingState, now_ns: u64, cost: u64) -> Decision {
        self.prune(state, now_ns);
        let want = cost.max(1);
        if state.total.saturating_add(want) <= self.limit {
            if cost > 0 {
                self.add(state, now_ns, cost);
            }
            Decision::allow(
                self.limit,
                self.limit - state.total,
                until(self.empty_at_ns(state), now_ns),
            )
        } else {
            let mut to_free = state.total.saturating_add(want) - self.limit;
            let mut retry_ns = self.empty_at_ns(state);
            for &(start, count) in &state.buckets {
                if count >= to_free {
                    retry_ns = start.saturating_add(self.window_ns);
                    break;
                }
                to_free -= count;
            }
            Decision::deny(
                self.limit,
                self.limit.saturating_sub(state.total),
                until(self.empty_at_ns(state), now_ns),
                until(retry_ns, now_ns),
            )
        }
    }

    fn penalize(&self, state: &mut SlidingState, now_ns: u64, n: u64) {
        self.prune(state, now_ns);
        if n > 0 {
            self.add(state, now_ns, n);
        }
    }

    fn reward(&self, state: &mut SlidingState, now_ns: u64, n: u64) {
        self.prune(state, now_ns);
        let mut n = n;
        while n > 0 {
            let Some(back) = state.buckets.back_mut() else {
                break;
            };
            let taken = back.1.min(n);
            back.1 -= taken;
            state.total -= taken;
            n -= taken;
            if back.1 == 0 {
                state.buckets.pop_back();
            }
        }
    }

    fn used(&self, state: &SlidingState, now_ns: u64) -> u64 {
        self.counted(state, now_ns)
    }

    fn fresh_at_ns(&self, state: &SlidingState) -> u64 {
        self.empty_at_ns(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_is_exact() {
        let log = Sliding {
            limit: 2,
            window_ns: 1_000,
            precision_ns: 1,
        };
        let mut s = log.fresh(0);
        assert!(log.check(&mut s, 100, 1).allowed);
        assert!(log.check(&mut s, 600, 1).allowed);
        let d = log.check(&mut s, 999, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after.as_nanos(), 101);
        assert!(!log.check(&mut s, 1_099, 1).allowed);
        assert!(log.check(&mut s, 1_100, 1).allowed);
    }

    #[test]
    fn the_counter_counts_in_buckets() {
        let counter = Sliding {
            limit: 3,
            window_ns: 1_000,
            precision_ns: 250,
        };
        let mut s = counter.fresh(0);
        assert!(counter.check(&mut s, 260, 2).allowed);
        assert!(counter.check(&mut s, 499, 1).allowed);
        assert_eq!(s.buckets.len(), 1, "both hits share the bucket at 250");
        let d = counter.check(&mut s, 900, 1);
        assert_eq!(
            d.retry_after.as_nanos(),
            350,
            "the bucket at 250 stops at 1250"
        );
    }

    #[test]
    fn reward_takes_back_the_newest_hits() {
        let log = Sliding {
            limit: 5,
            window_ns: 1_000,
            precision_ns: 1,
        };
        let mut s = log.fresh(0);
        log.check(&mut s, 10, 2);
        log.check(&mut s, 20, 2);
        log.reward(&mut s, 20, 3);
        assert_eq!(s.buckets, VecDeque::from([(10, 1)]));
        assert_eq!(s.total, 1);
    }
}
