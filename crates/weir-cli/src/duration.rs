//! Durations as people type them and as the reports print them. Parsing is weir-config's
//! one grammar ([`weir_config::parse_duration`]: `500ms`, `1.5s`, `1m30s`), re-exported for
//! the rule specs (`window=1s`), the traffic options and file, and every `--*` duration
//! option; formatting (`format_duration`, which that grammar reads back) is here.

use std::time::Duration;

pub(crate) use weir_config::{parse_duration, DurationError};

/// Nanoseconds in one second.
pub(crate) const SECOND_NS: u64 = 1_000_000_000;

/// A decimal number of seconds (`0.9`, `12`, `1.25`) as nanoseconds, exactly: the
/// duration grammar's seconds with the `s` left out. Anything else is read as a duration,
/// so its error names what is wrong (`1m30` has a number without a unit).
pub(crate) fn parse_seconds(text: &str) -> Result<u64, DurationError> {
    let text = text.trim();
    let duration = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        parse_duration(&format!("{text}s")).map_err(|e| match e {
            DurationError::TooLarge(_) => DurationError::TooLarge(text.to_owned()),
            _ => DurationError::BadNumber(text.to_owned()),
        })?
    } else {
        parse_duration(text)?
    };
    Ok(nanos(duration))
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
    fn the_grammar_is_weir_configs() {
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert!(matches!(
            parse_duration("10"),
            Err(DurationError::MissingUnit(_))
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
        assert_eq!(
            parse_seconds("1.2.3"),
            Err(DurationError::BadNumber("1.2.3".into()))
        );
        assert!(parse_seconds("1m30").is_err());
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
