//! The one duration grammar (`weir_config::parse_duration`) on arbitrary input: it never
//! panics, and every duration written Go-style (`1d2h3m4.000000005s`) or in one unit reads
//! back exactly.

use std::time::Duration;

use proptest::prelude::*;
use weir_config::{parse_duration, DurationError};

/// `ns` as Go-style terms, largest unit first: `1d2h3m4.5s`, `0s`.
fn compound(ns: u64) -> String {
    const S: u64 = 1_000_000_000;
    let (d, rest) = (ns / (86_400 * S), ns % (86_400 * S));
    let (h, rest) = (rest / (3_600 * S), rest % (3_600 * S));
    let (m, rest) = (rest / (60 * S), rest % (60 * S));
    let mut text = String::new();
    for (n, unit) in [(d, "d"), (h, "h"), (m, "m")] {
        if n > 0 {
            text.push_str(&format!("{n}{unit}"));
        }
    }
    if rest > 0 || text.is_empty() {
        let frac = format!("{:09}", rest % S);
        let frac = frac.trim_end_matches('0');
        match frac.is_empty() {
            true => text.push_str(&format!("{}s", rest / S)),
            false => text.push_str(&format!("{}.{frac}s", rest / S)),
        }
    }
    text
}

proptest! {
    #[test]
    fn arbitrary_text_never_panics(text in ".{0,40}") {
        let _ = parse_duration(&text);
    }

    #[test]
    fn duration_shaped_text_never_panics(text in "[0-9.]{0,25}(ns|us|µs|ms|s|m|h|d|x|)([0-9.]{0,25}(s|m|h|d))?") {
        let _ = parse_duration(&text);
    }

    #[test]
    fn compound_forms_read_back_exactly(ns in any::<u64>()) {
        let text = compound(ns);
        prop_assert_eq!(parse_duration(&text), Ok(Duration::from_nanos(ns)), "{}", text);
    }

    #[test]
    fn one_unit_forms_read_back_exactly(ns in any::<u64>()) {
        prop_assert_eq!(parse_duration(&format!("{ns}ns")), Ok(Duration::from_nanos(ns)));
        let ms = ns / 1_000_000;
        let text = format!("{ms}.{:06}ms", ns % 1_000_000);
        prop_assert_eq!(parse_duration(&text), Ok(Duration::from_nanos(ns)), "{}", text);
    }

    #[test]
    fn a_sign_is_refused(ns in any::<u32>(), sign in "[-+]") {
        let text = format!("{sign}{ns}s");
        prop_assert_eq!(parse_duration(&text), Err(DurationError::BadNumber(text.clone())));
    }
}
