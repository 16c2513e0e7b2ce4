//! The circuit breaker's sliding window: the last `window` of an upstream's calls, as
//! [`BUCKETS`] buckets of `window / BUCKETS` each (Sentinel's `LeapArray`, resilience4j's
//! time-based window). Pure: every function takes `now`; no clock, no lock. The machine
//! (`machine.rs`) records each finished call here and reads the ratios to decide whether
//! to open.

/// How many buckets a window is split into: a call leaves the window within a tenth of
/// it after it is `window` old.
pub(crate) const BUCKETS: usize = 10;

/// One bucket: the calls that finished during one tenth of the window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Bucket {
    /// Which tenth (`now / width`) these counts belong to.
    index: u64,
    calls: u32,
    failures: u32,
    slow: u32,
}

/// The counts over the window, as read at one instant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Totals {
    /// Calls that finished inside the window.
    pub(crate) calls: u32,
    /// Of them, failed (a 5xx, no answer, a timeout).
    pub(crate) failures: u32,
    /// Of them, slower than the slow-call threshold.
    pub(crate) slow: u32,
}

/// The last `window` of calls, in buckets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    width_ns: u64,
    buckets: [Bucket; BUCKETS],
}

impl Window {
    /// A window of `window_ns` (at least one nanosecond per bucket).
    pub(crate) fn new(window_ns: u64) -> Self {
        let buckets = u64::try_from(BUCKETS).unwrap_or(1);
        Self {
            width_ns: (window_ns / buckets).max(1),
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    /// Counts one call that finished at `now_ns`.
    pub(crate) fn record(&mut self, now_ns: u64, failed: bool, slow: bool) {
        let index = now_ns / self.width_ns;
        let slot = self.slot(index);
        let bucket = &mut self.buckets[slot];
        if bucket.index != index || bucket.calls == 0 {
            *bucket = Bucket {
                index,
                ..Bucket::default()
            };
        }
        bucket.calls = bucket.calls.saturating_add(1);
        bucket.failures = bucket.failures.saturating_add(u32::from(failed));
        bucket.slow = bucket.slow.saturating_add(u32::from(slow));
    }

    /// The counts of the buckets still inside the window at `now_ns`.
    pub(crate) fn totals(&self, now_ns: u64) -> Totals {
        let index = now_ns / self.width_ns;
        let span = u64::try_from(BUCKETS).unwrap_or(1);
        self.buckets
            .iter()
            .filter(|b| b.calls > 0 && b.index <= index && index - b.index < span)
            .fold(Totals::default(), |t, b| Totals {
                calls: t.calls.saturating_add(b.calls),
                failures: t.failures.saturating_add(b.failures),
                slow: t.slow.saturating_add(b.slow),
            })
    }

    /// Forgets every call (the circuit changed state: the next closed period starts afresh).
    pub(crate) fn clear(&mut self) {
        self.buckets = [Bucket::default(); BUCKETS];
    }

    fn slot(&self, index: u64) -> usize {
        let span = u64::try_from(BUCKETS).unwrap_or(1);
        usize::try_from(index % span).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn calls_leave_the_window_once_it_has_passed() {
        let mut w = Window::new(10 * SECOND);
        w.record(0, true, false);
        w.record(SECOND / 2, false, true);
        w.record(3 * SECOND, false, false);
        let t = w.totals(3 * SECOND);
        assert_eq!((t.calls, t.failures, t.slow), (3, 1, 1));
        // 10 s later the first second's bucket has left; the third's has not.
        let t = w.totals(10 * SECOND);
        assert_eq!((t.calls, t.failures, t.slow), (1, 0, 0));
        assert_eq!(w.totals(13 * SECOND), Totals::default());
    }

    #[test]
    fn a_reused_slot_starts_from_zero() {
        let mut w = Window::new(10 * SECOND);
        w.record(SECOND, true, true);
        // The same slot, one window later.
        w.record(11 * SECOND, false, false);
        let t = w.totals(11 * SECOND);
        assert_eq!((t.calls, t.failures, t.slow), (1, 0, 0));
        w.clear();
        assert_eq!(w.totals(11 * SECOND), Totals::default());
    }

    #[test]
    fn a_window_shorter_than_its_buckets_still_counts() {
        let mut w = Window::new(3);
        w.record(5, true, false);
        assert_eq!(w.totals(5).calls, 1);
        assert_eq!(w.totals(100).calls, 0);
    }
}
