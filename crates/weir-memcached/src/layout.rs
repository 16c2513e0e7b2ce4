//! Where a rule's record lives in memcached: the second step of a decision, after the key's
//! names (`keys.rs`) and before the read. Pure: maps (rule, key, now) to the names to read.
//!
//! - **Record** (sliding log, weighted window, token and leaky buckets, GCRA, the queue,
//!   leases, and a sliding window counter with more than [`MAX_BUCKETS`] buckets): the whole
//!   [`Record`](weir_core::Record) in one value, changed with `gets`/`cas`.
//! - **Counter** (fixed window, sliding window counter): one decimal value per bucket
//!   (`f…`/`s…` names), changed with `incr` (and `add`/`cas` when it appears or shrinks),
//!   plus the record name holding only the guard (block, lockout strikes).

use weir_core::time::duration_ns;
use weir_core::{Algorithm, Rule};

use crate::keys::Names;

/// The most buckets a sliding window counter keeps as separate counters; above it, a read
/// would fetch too many keys, so the rule is kept as one record instead. A constant, not an
/// option: every instance must lay a rule out alike.
pub const MAX_BUCKETS: u64 = 64;

/// Which of the two counter algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CounterKind {
    /// One counter per window; the value is the count.
    Fixed,
    /// One counter per bucket of the precision; the value is the count plus one, so that a
    /// bucket holding zero (a zero penalty) differs from no bucket. A deleted bucket is an
    /// empty value, on which `incr` fails: it can never be mistaken for a count.
    Sliding,
}

/// A counter rule's geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Counter {
    pub kind: CounterKind,
    /// How long a hit counts.
    pub window_ns: u64,
    /// The width of one bucket (the window itself for the fixed window).
    pub width_ns: u64,
}

/// How a rule is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    Record,
    Counter(Counter),
}

impl Layout {
    /// The layout of `rule`.
    pub(crate) fn of(rule: &Rule) -> Self {
        let window_ns = duration_ns(rule.window());
        match rule.algorithm() {
            Algorithm::FixedWindow(_) if window_ns > 0 => Self::Counter(Counter {
                kind: CounterKind::Fixed,
                window_ns,
                width_ns: window_ns,
            }),
            Algorithm::SlidingWindow(s)
                if s.precision_ns() > 0
                    && window_ns.is_multiple_of(s.precision_ns())
                    && window_ns / s.precision_ns() <= MAX_BUCKETS =>
            {
                Self::Counter(Counter {
                    kind: CounterKind::Sliding,
                    window_ns,
                    width_ns: s.precision_ns(),
                })
            }
            _ => Self::Record,
        }
    }
}

impl Counter {
    /// The starts of the buckets that count at `now_ns`, oldest first.
    pub(crate) fn starts(&self, now_ns: u64) -> Vec<u64> {
        let current = now_ns - now_ns % self.width_ns;
        let n = self.window_ns / self.width_ns;
        (0..n)
            .rev()
            .filter_map(|i| current.checked_sub(i.checked_mul(self.width_ns)?))
            .filter(|start| start.saturating_add(self.window_ns) > now_ns)
            .collect()
    }

    /// The name of the bucket starting at `start_ns`.
    pub(crate) fn name(&self, names: &Names, start_ns: u64) -> String {
        match self.kind {
            CounterKind::Fixed => names.fixed(start_ns),
            CounterKind::Sliding => names.sliding(start_ns),
        }
    }

    /// What a stored value adds to the count (see [`CounterKind`]).
    pub(crate) fn offset(&self) -> u64 {
        match self.kind {
            CounterKind::Fixed => 0,
            CounterKind::Sliding => 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_sliding_counter_reads_every_bucket_of_its_window() {
        let rule = Rule::sliding_window(5, Duration::from_nanos(1_000), Duration::from_nanos(250))
            .unwrap();
        let Layout::Counter(c) = Layout::of(&rule) else {
            panic!("a counter")
        };
        assert_eq!(c.starts(10_260), [9_500, 9_750, 10_000, 10_250]);
        let fixed = Layout::of(&Rule::fixed_window(5, Duration::from_nanos(1_000)).unwrap());
        let Layout::Counter(f) = fixed else {
            panic!("a counter")
        };
        assert_eq!(f.starts(10_999), [10_000]);
    }

    #[test]
    fn fine_precisions_and_other_algorithms_are_records() {
        let fine =
            Rule::sliding_window(5, Duration::from_secs(1), Duration::from_millis(1)).unwrap();
        assert_eq!(Layout::of(&fine), Layout::Record);
        assert_eq!(Layout::of(&Rule::per_second(5).unwrap()), Layout::Record);
        let log = Rule::sliding_log(5, Duration::from_secs(1)).unwrap();
        assert_eq!(Layout::of(&log), Layout::Record);
    }
}
