//! [`BreakerSettings`]: the knobs of every upstream's circuit breaker (`weir proxy
//! --breaker-*`), checked once at start-up so a bad value is an error naming the knob, not
//! a breaker that never opens or never closes. The defaults and why they are what they
//! are: `docs/circuit-breaking.md`.

use std::time::Duration;

/// A breaker setting that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BreakerError {
    /// A ratio outside `(0, 1]`.
    #[error("breaker {knob} {value}: a ratio must be above 0 and at most 1")]
    Ratio {
        /// The knob (`error_ratio`, `slow_ratio`).
        knob: &'static str,
        /// What was given.
        value: f64,
    },
    /// A duration or count of zero.
    #[error("breaker {0} must be above zero")]
    Zero(&'static str),
}

/// How each upstream's circuit breaker opens, stays open and closes again.
///
/// Closed, it counts the calls that finished in the last [`window`](Self::window); once
/// there are at least [`min_calls`](Self::min_calls) and the failed share reaches
/// [`error_ratio`](Self::error_ratio) or the slow share (slower than
/// [`slow_call`](Self::slow_call)) reaches [`slow_ratio`](Self::slow_ratio), it opens for
/// [`open_for`](Self::open_for); then it lets [`probes`](Self::probes) calls through
/// (half-open): all of them fine closes it, one failed or slow opens it again.
///
/// ```
/// use std::time::Duration;
/// use weir_proxy::BreakerSettings;
///
/// let mut breaker = BreakerSettings::default();
/// breaker.open_for = Duration::from_secs(10);
/// assert!(breaker.check().is_ok());
/// breaker.error_ratio = 1.5;
/// assert_eq!(
///     breaker.check().unwrap_err().to_string(),
///     "breaker error_ratio 1.5: a ratio must be above 0 and at most 1"
/// );
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct BreakerSettings {
    /// The failed share of the window's calls that opens the circuit (default 0.5).
    pub error_ratio: f64,
    /// A call whose response head takes longer than this is slow (default 5 s).
    pub slow_call: Duration,
    /// The slow share of the window's calls that opens the circuit (default 0.8).
    pub slow_ratio: f64,
    /// How far back calls are counted (default 10 s).
    pub window: Duration,
    /// The fewest calls in the window before either ratio is read (default 20).
    pub min_calls: u32,
    /// How long the circuit stays open before probes go through (default 30 s).
    pub open_for: Duration,
    /// How many calls go through half-open, all of which must be fine (default 5).
    pub probes: u32,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        Self {
            error_ratio: 0.5,
            slow_call: Duration::from_secs(5),
            slow_ratio: 0.8,
            window: Duration::from_secs(10),
            min_calls: 20,
            open_for: Duration::from_secs(30),
            probes: 5,
        }
    }
}

impl BreakerSettings {
    /// Checks every knob: ratios in `(0, 1]`, durations and counts above zero.
    pub fn check(&self) -> Result<(), BreakerError> {
        for (knob, value) in [
            ("error_ratio", self.error_ratio),
            ("slow_ratio", self.slow_ratio),
        ] {
            if !(value > 0.0 && value <= 1.0) {
                return Err(BreakerError::Ratio { knob, value });
            }
        }
        for (knob, zero) in [
            ("slow_call", self.slow_call.is_zero()),
            ("window", self.window.is_zero()),
            ("min_calls", self.min_calls == 0),
            ("open_for", self.open_for.is_zero()),
            ("probes", self.probes == 0),
        ] {
            if zero {
                return Err(BreakerError::Zero(knob));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unusable_knob_is_named() {
        assert_eq!(BreakerSettings::default().check(), Ok(()));
        let with = |f: fn(&mut BreakerSettings)| {
            let mut s = BreakerSettings::default();
            f(&mut s);
            s.check().unwrap_err().to_string()
        };
        assert_eq!(
            with(|s| s.slow_ratio = 0.0),
            "breaker slow_ratio 0: a ratio must be above 0 and at most 1"
        );
        assert_eq!(
            with(|s| s.error_ratio = f64::NAN),
            "breaker error_ratio NaN: a ratio must be above 0 and at most 1"
        );
        assert_eq!(
            with(|s| s.window = Duration::ZERO),
            "breaker window must be above zero"
        );
        assert_eq!(with(|s| s.probes = 0), "breaker probes must be above zero");
        assert_eq!(
            with(|s| s.min_calls = 0),
            "breaker min_calls must be above zero"
        );
        assert_eq!(
            with(|s| s.open_for = Duration::ZERO),
            "breaker open_for must be above zero"
        );
        assert_eq!(
            with(|s| s.slow_call = Duration::ZERO),
            "breaker slow_call must be above zero"
        );
    }
}
