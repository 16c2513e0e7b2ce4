//! The time units of envoyproxy/ratelimit's `rate_limit.unit` (and of a request's limit
//! override), and their lengths. A `rate_limit` becomes a fixed window of
//! `unit × unit_multiplier`, aligned to the Unix epoch as ratelimit's cache keys are.

use std::fmt;
use std::time::Duration;

/// A ratelimit time unit. Names are matched case-insensitively, as ratelimit does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Unit {
    /// One second.
    Second,
    /// 60 seconds.
    Minute,
    /// 3600 seconds.
    Hour,
    /// 86 400 seconds.
    Day,
    /// 7 days.
    Week,
    /// 30 days (ratelimit's divider; not calendar months).
    Month,
    /// 365 days (ratelimit's divider; not calendar years).
    Year,
}

impl Unit {
    /// Every unit, shortest first.
    pub const ALL: [Unit; 7] = [
        Self::Second,
        Self::Minute,
        Self::Hour,
        Self::Day,
        Self::Week,
        Self::Month,
        Self::Year,
    ];

    /// The unit named `name` (`second`, `MINUTE`, …), if any.
    pub fn parse(name: &str) -> Option<Unit> {
        Self::ALL
            .into_iter()
            .find(|unit| unit.name().eq_ignore_ascii_case(name))
    }

    /// The unit's lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Second => "second",
            Self::Minute => "minute",
            Self::Hour => "hour",
            Self::Day => "day",
            Self::Week => "week",
            Self::Month => "month",
            Self::Year => "year",
        }
    }

    /// The unit's length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Self::Second => 1,
            Self::Minute => 60,
            Self::Hour => 3600,
            Self::Day => 86_400,
            Self::Week => 7 * 86_400,
            Self::Month => 30 * 86_400,
            Self::Year => 365 * 86_400,
        }
    }

    /// `multiplier` units as a duration (saturating).
    pub fn times(self, multiplier: u64) -> Duration {
        Duration::from_secs(self.seconds().saturating_mul(multiplier))
    }
}

impl fmt::Display for Unit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_case_insensitive() {
        assert_eq!(Unit::parse("SECOND"), Some(Unit::Second));
        assert_eq!(Unit::parse("Minute"), Some(Unit::Minute));
        assert_eq!(Unit::parse("fortnight"), None);
        assert_eq!(Unit::Day.times(2), Duration::from_secs(172_800));
    }
}
