//! Durations in rule files: a whole number and a unit, `250ms`, `1s`, `5m`, `1h`, `1d`. No
//! fractions, no compound forms, no bare numbers (a bare `60` could mean anything). Used by
//! `compile.rs` for `per`, `window`, `precision`, `max_wait` and the lockout's durations.

use std::time::Duration;

/// The units accepted, longest suffix first so that `ms` is not read as `m`.
const UNITS: [(&str, u64); 5] = [
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// Parses `text` as a duration, or says why not.
pub(crate) fn parse(text: &str) -> Result<Duration, String> {
    let bad = || {
        format!("invalid duration '{text}': expected a whole number and a unit (ms, s, m, h or d), e.g. 250ms or 5m")
    };
    let (digits, ns_per_unit) = UNITS
        .iter()
        .find_map(|(suffix, ns)| text.strip_suffix(suffix).map(|d| (d, *ns)))
        .ok_or_else(bad)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let too_large = || format!("duration '{text}' is too large");
    let count: u64 = digits.parse().map_err(|_| too_large())?;
    let ns = count.checked_mul(ns_per_unit).ok_or_else(too_large)?;
    Ok(Duration::from_nanos(ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_parses() {
        assert_eq!(parse("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse("1s"), Ok(Duration::from_secs(1)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1d"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn malformed_durations_say_what_is_expected() {
        for bad in ["", "s", "1", "1.5s", "-1s", "1 s", "1w", "1sec", "+1s"] {
            let err = parse(bad).unwrap_err();
            assert!(err.starts_with("invalid duration"), "{bad}: {err}");
        }
        assert_eq!(
            parse("99999999999999999d").unwrap_err(),
            "duration '99999999999999999d' is too large"
        );
    }
}
