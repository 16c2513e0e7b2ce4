//! Weir's one duration grammar, read by rule files (`per`, `window`, `precision`,
//! `max_wait`, the lockout's durations), `weir simulate`'s rule specs and traffic, and every
//! command-line duration option. Pure parsing into exact integer nanoseconds: no floats.
//!
//! The grammar is Go's `time.ParseDuration` (what envoyproxy/ratelimit users write), plus
//! a `d` unit, minus signs and bare numbers: one or more `<number><unit>` terms, summed.
//!
//! - a number is decimal digits with an optional fraction: `1`, `1.5`, `.5`, `1.`; a
//!   fraction is exact, and what falls below 1 ns is dropped (`1.0000000009s` is 1 s);
//! - units: `ns`, `us` (or `µs`, `μs`), `ms`, `s`, `m`, `h`, `d` (24 h);
//! - terms may repeat or come in any order, as in Go (`1m30s` = `90s` = `1.5m`);
//! - refused: an empty text, a number without a unit (even `0`), a sign (`-1s`, `+1s`),
//!   spaces inside (`1 s`), an unknown unit (`1w`, `1sec`), and more than `u64::MAX`
//!   nanoseconds (about 584 years). Spaces around the whole text are ignored.

use std::time::Duration;

/// Nanoseconds per unit. Matched as the longest run of non-digits after a number, so `ms`
/// is never read as `m`.
const UNITS: [(&str, u64); 9] = [
    ("ns", 1),
    ("us", 1_000),
    ("µs", 1_000),
    ("μs", 1_000),
    ("ms", 1_000_000),
    ("s", 1_000_000_000),
    ("m", 60_000_000_000),
    ("h", 3_600_000_000_000),
    ("d", 86_400_000_000_000),
];

/// The units, as error messages list them.
const UNIT_LIST: &str = "ns, us, ms, s, m, h or d";

/// Why a duration did not parse. Every message quotes the text as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Nothing was given.
    #[error("empty duration; write a number and a unit, e.g. 500ms, 1.5s or 1m30s")]
    Empty,
    /// A number without a unit, e.g. `10` or the `30` of `1m30`.
    #[error("invalid duration '{0}': a number has no unit ({UNIT_LIST}), e.g. 10s or 1m30s")]
    MissingUnit(String),
    /// A unit that is not `ns`, `us` (`µs`, `μs`), `ms`, `s`, `m`, `h` or `d`.
    #[error("invalid duration '{text}': unknown unit '{unit}'; expected {UNIT_LIST}, e.g. 250ms or 1m30s")]
    UnknownUnit {
        /// The whole text.
        text: String,
        /// The unit as written.
        unit: String,
    },
    /// Something that is not a number where a number should be: a sign, a space, `1.2.3`.
    #[error("invalid duration '{0}': expected numbers with units, e.g. 250ms, 1.5s or 1h2m3.5s (no sign, no spaces)")]
    BadNumber(String),
    /// More than `u64::MAX` nanoseconds.
    #[error("duration '{0}' is too large (the maximum is about 584 years)")]
    TooLarge(String),
}

/// Parses a duration: `250ms`, `1.5s`, `1m30s`, `1h2m3.5s`, `1d`, `100ns`, `250us`.
///
/// See the module documentation above (or `config/README.md`) for the whole grammar.
///
/// ```
/// use std::time::Duration;
/// use weir_config::{parse_duration, DurationError};
///
/// assert_eq!(parse_duration("250ms")?, Duration::from_millis(250));
/// assert_eq!(parse_duration("1.5s")?, Duration::from_millis(1500));
/// assert_eq!(parse_duration("1m30s")?, Duration::from_secs(90));
/// assert_eq!(parse_duration("1h2m3.5s")?, Duration::from_millis(3_723_500));
/// assert_eq!(parse_duration("1d")?, Duration::from_secs(86_400));
/// assert!(matches!(parse_duration("60"), Err(DurationError::MissingUnit(_))));
/// assert_eq!(
///     parse_duration("-1s").unwrap_err().to_string(),
///     "invalid duration '-1s': expected numbers with units, e.g. 250ms, 1.5s or 1h2m3.5s (no sign, no spaces)"
/// );
/// # Ok::<(), DurationError>(())
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let whole = text.trim();
    if whole.is_empty() {
        return Err(DurationError::Empty);
    }
    let too_large = || DurationError::TooLarge(whole.to_owned());
    let mut rest = whole;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        if number.is_empty() {
            return Err(DurationError::BadNumber(whole.to_owned()));
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit(whole.to_owned()));
        }
        let Some(&(_, unit_ns)) = UNITS.iter().find(|(name, _)| *name == unit) else {
            if unit.contains(|c: char| c.is_whitespace() || c == '-' || c == '+') {
                return Err(DurationError::BadNumber(whole.to_owned()));
            }
            return Err(DurationError::UnknownUnit {
                text: whole.to_owned(),
                unit: unit.to_owned(),
            });
        };
        let term = scaled(number, unit_ns, whole)?;
        total = total.checked_add(term).ok_or_else(too_large)?;
        rest = next;
    }
    Ok(Duration::from_nanos(total))
}

/// `number × unit_ns` in whole nanoseconds, where `number` is `digits[.digits]` with
/// digits on at least one side. `whole` is the full text, for errors.
fn scaled(number: &str, unit_ns: u64, whole: &str) -> Result<u64, DurationError> {
    let bad = || DurationError::BadNumber(whole.to_owned());
    let too_large = || DurationError::TooLarge(whole.to_owned());
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(bad());
    }
    let int_ns = if int.is_empty() {
        0
    } else {
        int.parse::<u128>()
            .map_err(|_| too_large())?
            .checked_mul(u128::from(unit_ns))
            .ok_or_else(too_large)?
    };
    // At most 18 fraction digits: 10^18 × 8.64·10^13 ns still fits in a u128, and the
    // digits after them are worth less than 1 ns in every unit.
    let frac = frac.get(..frac.len().min(18)).unwrap_or("");
    let frac_ns = if frac.is_empty() {
        0
    } else {
        let digits = u32::try_from(frac.len()).map_err(|_| bad())?;
        frac.parse::<u128>().map_err(|_| bad())? * u128::from(unit_ns) / 10u128.pow(digits)
    };
    u64::try_from(int_ns + frac_ns).map_err(|_| too_large())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(text: &str) -> u64 {
        u64::try_from(parse_duration(text).unwrap().as_nanos()).unwrap()
    }

    #[test]
    fn every_unit_parses() {
        let s = 1_000_000_000;
        let cases = [
            ("100ns", 100),
            ("250us", 250_000),
            ("250µs", 250_000),
            ("250μs", 250_000),
            ("250ms", 250_000_000),
            ("1s", s),
            ("5m", 300 * s),
            ("1h", 3_600 * s),
            ("1d", 86_400 * s),
            ("0s", 0),
            (" 2s ", 2 * s),
        ];
        for (text, want) in cases {
            assert_eq!(ns(text), want, "{text}");
        }
    }

    #[test]
    fn fractions_are_exact_and_drop_below_a_nanosecond() {
        assert_eq!(ns("1.5s"), 1_500_000_000);
        assert_eq!(ns(".5s"), 500_000_000);
        assert_eq!(ns("1.s"), 1_000_000_000);
        assert_eq!(ns("0.1s"), 100_000_000, "no float rounding");
        assert_eq!(ns("1.5m"), 90_000_000_000);
        assert_eq!(ns("1.0000000009s"), 1_000_000_000);
        assert_eq!(ns("0.5ns"), 0);
    }

    #[test]
    fn go_compound_forms_sum_their_terms() {
        assert_eq!(ns("1m30s"), 90_000_000_000);
        assert_eq!(ns("1h2m3.5s"), 3_723_500_000_000);
        assert_eq!(ns("1d12h"), 129_600_000_000_000);
        assert_eq!(ns("1s500ms"), 1_500_000_000);
        assert_eq!(ns("30s1m"), 90_000_000_000, "any order, as in Go");
    }

    #[test]
    fn errors_name_the_input() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("  "), Err(DurationError::Empty));
        for bad in ["s", "-1s", "+1s", "1 s", "1.2.3s", ".s", "1m -30s"] {
            let err = parse_duration(bad).unwrap_err();
            assert_eq!(err, DurationError::BadNumber(bad.trim().into()), "{bad}");
            assert!(err.to_string().contains(&format!("'{}'", bad.trim())));
        }
        for bad in ["1", "0", "1m30", "1.5"] {
            assert_eq!(
                parse_duration(bad),
                Err(DurationError::MissingUnit(bad.into()))
            );
        }
        assert_eq!(
            parse_duration("1sec").unwrap_err().to_string(),
            "invalid duration '1sec': unknown unit 'sec'; expected ns, us, ms, s, m, h or d, \
             e.g. 250ms or 1m30s"
        );
        assert!(matches!(
            parse_duration("1w"),
            Err(DurationError::UnknownUnit { .. })
        ));
        for huge in ["99999999999999999d", "300000d", "18446744073709551616ns"] {
            let err = parse_duration(huge).unwrap_err();
            assert_eq!(err, DurationError::TooLarge(huge.into()), "{huge}");
        }
        assert_eq!(ns("18446744073709551615ns"), u64::MAX);
        assert_eq!(
            parse_duration("213503d1d").unwrap_err().to_string(),
            "duration '213503d1d' is too large (the maximum is about 584 years)"
        );
    }
}
