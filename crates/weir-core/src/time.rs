//! Integer time helpers shared by every algorithm: durations become `u64` nanoseconds,
//! saturating instead of overflowing, and back.

use std::time::Duration;

/// One second in nanoseconds.
pub const SECOND_NS: u64 = 1_000_000_000;

/// A duration in nanoseconds, saturating at `u64::MAX` (584 years).
#[inline]
pub fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// `later - earlier` as a `Duration`, zero when `later` is not after `earlier`.
#[inline]
pub(crate) fn until(later_ns: u64, earlier_ns: u64) -> Duration {
    Duration::from_nanos(later_ns.saturating_sub(earlier_ns))
}

/// `a * b / c` without intermediate overflow, rounded up, saturating at `u64::MAX`.
#[inline]
pub(crate) fn mul_div_ceil(a: u64, b: u64, c: u64) -> u64 {
    if c == 0 {
        return u64::MAX;
    }
    u64::try_from((u128::from(a) * u128::from(b)).div_ceil(u128::from(c))).unwrap_or(u64::MAX)
}

/// `a / b` rounded up; `b` must not be zero (callers validate it at rule build time).
#[inline]
pub(crate) fn div_ceil(a: u64, b: u64) -> u64 {
    if b == 0 {
        return u64::MAX;
    }
    a.div_ceil(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mul_div_ceil_does_not_overflow() {
        assert_eq!(mul_div_ceil(u64::MAX, 2, 4), u64::MAX / 2 + 1);
        assert_eq!(mul_div_ceil(u64::MAX, u64::MAX, 1), u64::MAX);
        assert_eq!(mul_div_ceil(3, 1, 2), 2);
    }

    #[test]
    fn durations_saturate() {
        assert_eq!(duration_ns(Duration::MAX), u64::MAX);
        assert_eq!(until(5, 10), Duration::ZERO);
    }
}
