//! A Weir rule's limit as Envoy's `current_limit` (`requests_per_unit` per `unit`), for the
//! gRPC and `/json` answers. Envoy knows only seven units, and a Weir rule may have any
//! window (10 requests per 10 s, a GCRA's fill time), so the window is mapped to the
//! *nearest* unit, **honestly**: the reported rate never exceeds the rule's average rate.
//!
//! - An exact conversion is preferred, in the unit closest to the window on a log scale
//!   (10 per 10 s is 60 per minute; 10 per 30 min is 20 per hour).
//! - Otherwise the closest unit whose rounded-down rate is at least 1 (7 per 10 s is 42 per
//!   minute, not 0.7 per second).
//! - Concurrency leases have no window: their lease count with unit `UNKNOWN`.
//!
//! A rule written in envoyproxy/ratelimit's format converts exactly to its own unit (with a
//! `unit_multiplier` it becomes the exact rate in the closest unit).

use std::cell::Cell;
use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;

/// Envoy's units and their lengths in seconds, shortest first.
const UNITS: [(Unit, u64); 7] = [
    (Unit::Second, 1),
    (Unit::Minute, 60),
    (Unit::Hour, 3_600),
    (Unit::Day, 86_400),
    (Unit::Week, 7 * 86_400),
    (Unit::Month, 30 * 86_400),
    (Unit::Year, 365 * 86_400),
];

/// A limit in Envoy's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvoyLimit {
    /// Requests per unit (saturated to `u32::MAX`).
    pub requests_per_unit: u32,
    /// The unit.
    pub unit: Unit,
}

/// How far apart two lengths are on a log scale, as a comparable ratio (`≥ 1`), scaled to
/// stay in integers: `max / min` in millionths.
fn distance(a_ns: u128, b_ns: u128) -> u128 {
    let (hi, lo) = if a_ns >= b_ns {
        (a_ns, b_ns)
    } else {
        (b_ns, a_ns)
    };
    hi.saturating_mul(1_000_000) / lo.max(1)
}

/// `limit` per `window` in the nearest Envoy unit (see the module docs).
///
/// Every gRPC and `/json` answer reports each limit this way, and the choice takes seven
/// 128-bit divisions (some 1.1k instructions, more than the decision): the last answer is
/// kept per thread and reused for the same rule, which is nearly always the next one's.
pub fn envoy_limit(limit: u64, window: Duration) -> EnvoyLimit {
    thread_local! {
        static LAST: Cell<Option<(u64, Duration, EnvoyLimit)>> = const { Cell::new(None) };
    }
    LAST.with(|last| match last.get() {
        Some((l, w, found)) if l == limit && w == window => found,
        _ => {
            let found = nearest(limit, window);
            last.set(Some((limit, window, found)));
            found
        }
    })
}

/// [`envoy_limit`], computed.
fn nearest(limit: u64, window: Duration) -> EnvoyLimit {
    let saturate = |n: u128| u32::try_from(n).unwrap_or(u32::MAX);
    let window_ns = window.as_nanos();
    if window_ns == 0 {
        return EnvoyLimit {
            requests_per_unit: saturate(u128::from(limit)),
            unit: Unit::Unknown,
        };
    }
    let candidates = UNITS.iter().map(|&(unit, secs)| {
        let unit_ns = u128::from(secs).saturating_mul(1_000_000_000);
        let scaled = u128::from(limit).saturating_mul(unit_ns);
        (unit, scaled / window_ns, scaled % window_ns == 0, unit_ns)
    });
    let best = |exact_only: bool| {
        candidates
            .clone()
            .filter(|&(_, rate, exact, _)| rate >= 1 && (exact || !exact_only))
            .min_by_key(|&(_, _, _, unit_ns)| distance(unit_ns, window_ns))
    };
    match best(true).or_else(|| best(false)) {
        Some((unit, rate, _, _)) => EnvoyLimit {
            requests_per_unit: saturate(rate),
            unit,
        },
        // Less than one per year: report it as such rather than round it up.
        None => EnvoyLimit {
            requests_per_unit: 0,
            unit: Unit::Year,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(limit: u64, secs: u64) -> (u32, Unit) {
        let l = envoy_limit(limit, Duration::from_secs(secs));
        (l.requests_per_unit, l.unit)
    }

    #[test]
    fn exact_windows_map_to_their_unit() {
        assert_eq!(limit(500, 1), (500, Unit::Second));
        assert_eq!(limit(5, 86_400), (5, Unit::Day));
        assert_eq!(limit(100, 60), (100, Unit::Minute));
        assert_eq!(limit(3, 7 * 86_400), (3, Unit::Week));
    }

    #[test]
    fn other_windows_map_to_the_nearest_unit_without_overstating() {
        assert_eq!(
            limit(10, 10),
            (60, Unit::Minute),
            "exact; a minute is nearer 10 s than a second"
        );
        assert_eq!(limit(10, 1800), (20, Unit::Hour), "exact, nearest");
        assert_eq!(limit(7, 10), (42, Unit::Minute), "7/10 s is exactly 42/min");
        assert_eq!(
            limit(7, 13),
            (32, Unit::Minute),
            "no exact unit: 32.3/min rounds down"
        );
        assert_eq!(
            envoy_limit(3, Duration::from_millis(1500)),
            EnvoyLimit {
                requests_per_unit: 2,
                unit: Unit::Second
            }
        );
    }

    #[test]
    fn the_kept_answer_is_the_computed_one_whatever_came_before() {
        let cases = [
            (500, 1_000),
            (10, 10_000),
            (7, 13_000),
            (4, 0),
            (10, 10_000),
            (3, 1_500),
        ];
        for _ in 0..2 {
            for (l, ms) in cases {
                let window = Duration::from_millis(ms);
                assert_eq!(
                    envoy_limit(l, window),
                    nearest(l, window),
                    "{l} per {ms} ms"
                );
                assert_eq!(
                    envoy_limit(l, window),
                    nearest(l, window),
                    "{l} per {ms} ms, again"
                );
            }
        }
    }

    #[test]
    fn leases_have_no_unit_and_tiny_rates_are_not_rounded_up() {
        assert_eq!(limit(4, 0), (4, Unit::Unknown));
        assert_eq!(limit(1, 2 * 365 * 86_400), (0, Unit::Year));
    }
}
