//! Sliding window counter, two-window weighted estimate (the "Cloudflare" approximation).
//! Pure: maps (state, now, cost) to (decision, next state). Equivalent Lua and memcached
//! steps must agree with it.

use crate::decision::Decision;
use crate::time::{mul_div_ceil, until};

use super::Meter;

/// Estimates the count in the sliding window `(now − W, now]` from two epoch-aligned fixed
/// windows: `estimate = ⌈previous · (W − elapsed) / W⌉ + current`, where `elapsed` is the
/// time since the current window started. A request of cost `n` is allowed iff
/// `estimate + n ≤ limit`.
///
/// **Error bound:** the estimate assumes the previous window's hits were spread evenly. When
/// they were, the count is right within one unit. In the worst case (the previous window's
/// hits all at its very end) a window of length `W` can hold up to `limit + previous·elapsed/W`
/// units, always **less than `2·limit`**. Two counters per key, whatever the limit.
///
/// `retry_after` is exact: the estimate only falls as time passes, so the earliest instant
/// it admits the request is found by bisection over the same function.
///
/// Rule change: like the fixed window, counts carry over while their windows are current
/// under the new window length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WeightedWindow {
    pub(crate) limit: u64,
    pub(crate) window_ns: u64,
}

/// Weighted window state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WeightedWindowState {
    /// Start of the current window.
    pub window_start_ns: u64,
    /// Units in the window before it.
    pub previous: u64,
    /// Units in the current window.
    pub current: u64,
}

impl WeightedWindow {
    fn roll(&self, state: &WeightedWindowState, now_ns: u64) -> WeightedWindowState {
        let start_ns = now_ns - now_ns % self.window_ns;
        if state.window_start_ns >= start_ns {
            *state
        } else if state.window_start_ns.saturating_add(self.window_ns) == start_ns {
            WeightedWindowState {
                window_start_ns: start_ns,
                previous: state.current,
                current: 0,
            }
        } else {
            WeightedWindowState {
                window_start_ns: start_ns,
                previous: 0,
                current: 0,
            }
        }
    }

    fn estimate(&self, s: &WeightedWindowState, now_ns: u64) -> u64 {
        let elapsed = now_ns.saturating_sub(s.window_start_ns).min(self.window_ns);
        let weight = self.window_ns - elapsed;
        mul_div_ceil(s.previous, weight, self.window_ns).saturating_add(s.current)
    }

    fn admits(&self, state: &WeightedWindowState, at_ns: u64, want: u64) -> bool {
        let s = self.roll(state, at_ns);
        self.estimate(&s, at_ns).saturating_add(want) <= self.limit
    }

    fn empty_at_ns(&self, s: &WeightedWindowState) -> u64 {
        if s.current > 0 {
            s.window_start_ns
                .saturating_add(self.window_ns.saturating_mul(2))
        } else if s.previous > 0 {
            s.window_start_ns.saturating_add(self.window_ns)
        } else {
            0
        }
    }
}

impl Meter for WeightedWindow {
    type State = WeightedWindowState;

    fn fresh(&self, now_ns: u64) -> WeightedWindowState {
        self.roll(&WeightedWindowState::default(), now_ns)
    }

    fn check(&self, state: &mut WeightedWindowState, now_ns: u64, cost: u64) -> Decision {
        let mut s = self.roll(state, now_ns);
        let want = cost.max(1);
        let estimate = self.estimate(&s, now_ns);
        if estimate.saturating_add(want) <= self.limit {
            if cost > 0 {
                s.current += cost;
                *state = s;
            }
            let used = estimate + cost;
            Decision::allow(
                self.limit,
                self.limit - used,
                until(self.empty_at_ns(&s), now_ns),
            )
        } else {
            // The estimate never rises as time passes, and within 2·W it is zero.
            let (mut lo, mut hi) = (
                now_ns,
                now_ns.saturating_add(self.window_ns.saturating_mul(2)),
            );
            while lo + 1 < hi {
                let mid = lo + (hi - lo) / 2;
                if self.admits(&s, mid, want) {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            Decision::deny(
                self.limit,
                self.limit.saturating_sub(estimate),
                until(self.empty_at_ns(&s), now_ns),
                until(hi, now_ns),
            )
        }
    }

    fn penalize(&self, state: &mut WeightedWindowState, now_ns: u64, n: u64) {
        let mut s = self.roll(state, now_ns);
        s.current = s.current.saturating_add(n);
        *state = s;
    }

    fn reward(&self, state: &mut WeightedWindowState, now_ns: u64, n: u64) {
        let mut s = self.roll(state, now_ns);
        let from_current = s.current.min(n);
        s.current -= from_current;
        s.previous = s.previous.saturating_sub(n - from_current);
        *state = s;
    }

    fn used(&self, state: &WeightedWindowState, now_ns: u64) -> u64 {
        self.estimate(&self.roll(state, now_ns), now_ns)
    }

    fn fresh_at_ns(&self, state: &WeightedWindowState) -> u64 {
        self.empty_at_ns(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_window_weighs_less_as_time_passes() {
        let w = WeightedWindow {
            limit: 10,
            window_ns: 1_000,
        };
        let mut s = w.fresh(0);
        assert!(w.check(&mut s, 500, 10).allowed);
        // At 1250 the previous window weighs 3/4: estimate 7.5, rounded up to 8.
        assert_eq!(w.used(&s, 1_250), 8);
        let d = w.check(&mut s, 1_250, 3);
        assert!(!d.allowed);
        // 7 + 3 <= 10 once ceil(10 * (1000 - e) / 1000) <= 7, i.e. e >= 300.
        assert_eq!(d.retry_after.as_nanos(), 50);
        assert!(w.check(&mut s, 1_300, 3).allowed);
    }
}
