//! Durations as people type them (`500ms`, `1.5s`, `2m`) and as the reports print them.
//! Parsing only: used by the rule specs (`window=1s`), the traffic options (`--every 5s`)
//! and the traffic file. Exact integer nanoseconds, no floats on the way in.

use std::fmt;
use std::time::Duration;

/// Nanoseconds per unit, longest suffix first so `ms` is not read as `m` + `s`.
const UNITS: &[(&str, u64)] = &[
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Nanoseconds in one second.
pub(crate) const SECOND_NS: u64 = 1_000_000_000;

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum DurationError {
    /// Nothing was given.
    Empty,
    /// A number without a unit, e.g. `10`.
    MissingUnit(String),
    /// A unit that is not one of `ns us ms s m h d`.
    UnknownUnit(String),
    /// The number part is not a decimal number.
    BadNumber(String),
    /// More than `u64::MAX` nanoseconds (about 584 years).
    TooLarge(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Empty => write!(f, "empty duration; write e.g. 1s or 500ms"),
            Self::MissingUnit(s) => write!(f, "`{s}` has no unit; write e.g. {s}s or {s}ms"),
            Self::UnknownUnit(s) => write!(
                f,
                "`{s}` has an unknown unit; use ns, us, ms, s, m, h or d (e.g. 500ms)"
            ),
            Self::BadNumber(s) => write!(f, "`{s}` is not a duration; write e.g. 1s or 1.5s"),
            Self::TooLarge(s) => write!(f, "`{s}` is too long (the maximum is about 584 years)"),
        }
    }
}

impl std::error::Error for DurationError {}

/// Parses `<number><unit>`: `100ns`, `250us`, `500ms`, `1.5s`, `2m`, `1h`, `1d`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    if number.is_empty() {
        return Err(DurationError::BadNumber(text.to_owned()));
    }
    if unit.is_empty() {
        return Err(DurationError::MissingUnit(text.to_owned()));
    }
    let Some(&(_, unit_ns)) = UNITS.iter().find(|(name, _)| *name == unit.trim()) else {
        return Err(DurationError::UnknownUnit(text.to_owned()));
    };
    scaled(number, unit_ns, text).map(Duration::from_nanos)
}

/// A decimal number of seconds (`0.9`, `12`, `1.25`) as nanoseconds, exactly.
pub(crate) fn parse_seconds(text: &str) -> Result<u64, DurationError> {
    scaled(text.trim(), SECOND_NS, text)
}

/// `number × unit_ns`, where `number` is `digits[.digits]`; fractions finer than 1 ns are
/// dropped. `whole` is the full text, for errors.
fn scaled(number: &str, unit_ns: u64, whole: &str) -> Result<u64, DurationError> {
    let bad = || DurationError::BadNumber(whole.to_owned());
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() && frac.is_empty() {
        return Err(bad());
    }
    if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let too_large = || DurationError::TooLarge(whole.to_owned());
    let int_ns = if int.is_empty() {
        0
    } else {
        int.parse::<u128>().map_err(|_| too_large())? * u128::from(unit_ns)
    };
    // At most 18 fraction digits: 10^18 · 8.64·10^13 still fits in a u128.
    let frac = frac.get(..frac.len().min(18)).unwrap_or("");
    let frac_ns = if frac.is_empty() {
        0
    } else {
        let digits = u32::try_from(frac.len()).map_err(|_| bad())?;
        frac.parse::<u128>().map_err(|_| bad())? * u128::from(unit_ns) / 10u128.pow(digits)
    };
    u64::try_from(int_ns + frac_ns).map_err(|_| too_large())
}

/// `ns / unit_ns` (a power of ten) as a decimal without trailing zeros: `1.5`, `2`, `0.25`.
pub(crate) fn decimal(ns: u64, unit_ns: u64) -> String {
    let (int, rem) = (ns / unit_ns, ns % unit_ns);
    if rem == 0 {
        return int.to_string();
    }
    let width = usize::try_from(unit_ns.ilog10()).unwrap_or(9);
    let frac = format!("{rem:0width$}");
    format!("{int}.{}", frac.trim_end_matches('0'))
}

/// Nanoseconds as decimal seconds: `0`, `0.9`, `12.5`.
pub(crate) fn format_secs(ns: u64) -> String {
    decimal(ns, SECOND_NS)
}

/// A compact duration in the syntax [`parse_duration`] reads: `0s`, `250us`, `1.5ms`, `2s`,
/// `1.5s`. Seconds are never promoted to minutes, so a time axis reads evenly.
pub(crate) fn format_duration(ns: u64) -> String {
    match ns {
        0 => "0s".to_owned(),
        n if n >= SECOND_NS => format!("{}s", decimal(n, SECOND_NS)),
        n if n >= 1_000_000 => format!("{}ms", decimal(n, 1_000_000)),
        n if n >= 1_000 => format!("{}us", decimal(n, 1_000)),
        n => format!("{n}ns"),
    }
}

/// [`format_duration`] rounded to three significant digits, for means: `1.17s`, `333ms`.
pub(crate) fn format_approx(ns: u64) -> String {
    let digits = ns.checked_ilog10().unwrap_or(0) + 1;
    let factor = 10u64.pow(digits.saturating_sub(3));
    let rounded = (ns / factor).saturating_add(u64::from(ns % factor >= factor.div_ceil(2)));
    format_duration(rounded.saturating_mul(factor))
}

/// Nanoseconds of a `Duration`, saturating at `u64::MAX`.
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_parses() {
        let cases = [
            ("100ns", 100),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("500ms", 500_000_000),
            ("1s", SECOND_NS),
            ("2m", 120 * SECOND_NS),
            ("1h", 3_600 * SECOND_NS),
            ("1d", 86_400 * SECOND_NS),
            ("1.5s", 1_500_000_000),
            (".5s", 500_000_000),
            ("0.9s", 900_000_000),
            ("0s", 0),
        ];
        for (text, ns) in cases {
            assert_eq!(parse_duration(text), Ok(Duration::from_nanos(ns)), "{text}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(
            parse_duration("10").unwrap_err().to_string(),
            "`10` has no unit; write e.g. 10s or 10ms"
        );
        assert!(matches!(
            parse_duration("10sec"),
            Err(DurationError::UnknownUnit(_))
        ));
        assert!(matches!(
            parse_duration("1.2.3s"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("s"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("-1s"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("300000d"),
            Err(DurationError::TooLarge(_))
        ));
    }

    #[test]
    fn seconds_are_exact() {
        assert_eq!(parse_seconds("0.9"), Ok(900_000_000));
        assert_eq!(parse_seconds("12"), Ok(12 * SECOND_NS));
        assert_eq!(
            parse_seconds("0.0000000019"),
            Ok(1),
            "below 1 ns is dropped"
        );
        assert!(parse_seconds("1e3").is_err());
    }

    #[test]
    fn formatting_round_trips() {
        assert_eq!(format_secs(900_000_000), "0.9");
        assert_eq!(format_secs(10 * SECOND_NS), "10");
        assert_eq!(format_duration(0), "0s");
        assert_eq!(format_duration(1_500_000_000), "1.5s");
        assert_eq!(format_duration(120 * SECOND_NS), "120s");
        assert_eq!(format_duration(250_000), "250us");
        assert_eq!(format_duration(1_500_000), "1.5ms");
        assert_eq!(format_approx(1_500_000_003), "1.5s");
        assert_eq!(format_approx(1_166_666_666), "1.17s");
        assert_eq!(format_approx(333_333_333), "333ms");
        assert_eq!(format_approx(999_600_000), "1s");
        assert_eq!(format_approx(42), "42ns");
        assert_eq!(format_approx(0), "0s");
        for ns in [1, 999, 1_000, 123_456_789, 86_400 * SECOND_NS] {
            assert_eq!(
                parse_duration(&format_duration(ns)),
                Ok(Duration::from_nanos(ns))
            );
        }
    }
}
