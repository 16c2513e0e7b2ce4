//! Fixed window counter, aligned to the Unix epoch. Pure: maps (state, now, cost) to
//! (decision, next state). Equivalent Lua and memcached steps must agree with it.

use crate::decision::Decision;
use crate::time::until;

use super::Meter;

/// At most `limit` units per window `[k·W, (k+1)·W)`, windows aligned to the Unix epoch (so
/// every instance and every store agrees on where a window starts, as envoyproxy/ratelimit
/// does).
///
/// **Boundary burst:** a client can spend `limit` at the very end of one window and `limit`
/// again at the start of the next, so up to `2·limit` pass within any span shorter than `W`
/// that straddles a boundary. Use the sliding log or GCRA when that matters.
///
/// State: `window_start_ns` and `count`. `retry_after` is exact: the start of the next window.
///
/// Rule change: the count carries over when the key's window started within the current
/// window of the new rule; otherwise the key starts the new window fresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FixedWindow {
    pub(crate) limit: u64,
    pub(crate) window_ns: u64,
}

/// Fixed window state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FixedWindowState {
    /// Start of the window `count` belongs to.
    pub window_start_ns: u64,
    /// Units used in that window.
    pub count: u64,
}

impl FixedWindow {
    fn current(&self, state: &FixedWindowState, now_ns: u64) -> FixedWindowState {
        let start_ns = now_ns - now_ns % self.window_ns;
        if state.window_start_ns >= start_ns {
            // Same window, or a lagging clock: count into the newer window.
            *state
        } else {
            FixedWindowState {
                window_start_ns: start_ns,
                count: 0,
            }
        }
    }

    fn end_ns(&self, s: &FixedWindowState) -> u64 {
        s.window_start_ns.saturating_add(self.window_ns)
    }
}

impl Meter for FixedWindow {
    type State = FixedWindowState;

    fn fresh(&self, now_ns: u64) -> FixedWindowState {
        self.current(&FixedWindowState::default(), now_ns)
    }

    fn check(&self, state: &mut FixedWindowState, now_ns: u64, cost: u64) -> Decision {
        let mut s = self.current(state, now_ns);
        let end = until(self.end_ns(&s), now_ns);
        if s.count.saturating_add(cost.max(1)) <= self.limit {
            if cost > 0 {
                s.count += cost;
                *state = s;
            }
            Decision::allow(self.limit, self.limit - s.count, end)
        } else {
            Decision::deny(self.limit, self.limit.saturating_sub(s.count), end, end)
        }
    }

    fn penalize(&self, state: &mut FixedWindowState, now_ns: u64, n: u64) {
        let mut s = self.current(state, now_ns);
        s.count = s.count.saturating_add(n);
        *state = s;
    }

    fn reward(&self, state: &mut FixedWindowState, now_ns: u64, n: u64) {
        let mut s = self.current(state, now_ns);
        s.count = s.count.saturating_sub(n);
        *state = s;
    }

    fn used(&self, state: &FixedWindowState, now_ns: u64) -> u64 {
        self.current(state, now_ns).count
    }

    fn fresh_at_ns(&self, state: &FixedWindowState) -> u64 {
        if state.count == 0 {
            0
        } else {
            self.end_ns(state)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_aligned_to_the_epoch() {
        let fw = FixedWindow {
            limit: 2,
            window_ns: 1_000,
        };
        let mut s = fw.fresh(0);
        assert!(fw.check(&mut s, 1_900, 2).allowed);
        let d = fw.check(&mut s, 1_900, 1);
        assert!(!d.allowed);
        assert_eq!(d.retry_after.as_nanos(), 100);
        // The boundary burst: two more right after the boundary.
        assert!(fw.check(&mut s, 2_000, 2).allowed);
    }
}
