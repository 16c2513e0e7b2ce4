//! The knobs of the adaptive concurrency limit ([`AdaptiveSettings`]) and what is wrong
//! with a bad set of them ([`AdaptiveError`]). Checked once, when a [`GradientLimit`] is
//! built, so the state machine never runs on knobs that make no sense.
//!
//! [`GradientLimit`]: super::GradientLimit

use std::time::Duration;

/// The knobs of [`GradientLimit`](super::GradientLimit), named as in Envoy's
/// adaptive-concurrency filter where it has them. The defaults suit a backend whose
/// requests take milliseconds to a few hundred milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveSettings {
    /// The limit once the first minimum RTT is known (before it: `min_concurrency`).
    pub initial_limit: usize,
    /// The limit never goes below this (≥ 1).
    pub min_limit: usize,
    /// The limit never goes above this.
    pub max_limit: usize,
    /// The short window: samples are gathered this long, then the limit moves once.
    pub sample_window: Duration,
    /// The percentile of a window's RTTs taken as its sampled RTT (0 < p ≤ 1; 0.9 = p90).
    pub percentile: f64,
    /// How much slower than the minimum RTT a sample may be and still count as "no queue"
    /// (≥ 1; 1.25 = 25 % above, Envoy's `buffer`). Larger: more in flight, more latency.
    pub tolerance: f64,
    /// How far one window moves the limit towards its new value (0 < s ≤ 1; 1 = all the
    /// way, as Envoy does).
    pub smoothing: f64,
    /// The long window: the minimum RTT is measured again this often (± `jitter`).
    pub min_rtt_interval: Duration,
    /// Each measurement of the minimum RTT takes this many samples.
    pub min_rtt_requests: usize,
    /// The limit while the minimum RTT is measured (few enough that nothing queues).
    pub min_concurrency: usize,
    /// Spreads the measurements by up to this fraction of the interval (0 ≤ j < 1), so
    /// many proxies in front of one backend do not all measure at once.
    pub jitter: f64,
}

impl Default for AdaptiveSettings {
    fn default() -> Self {
        Self {
            initial_limit: 8,
            min_limit: 1,
            max_limit: 1000,
            sample_window: Duration::from_millis(100),
            percentile: 0.5,
            tolerance: 1.25,
            smoothing: 1.0,
            min_rtt_interval: Duration::from_secs(30),
            min_rtt_requests: 25,
            min_concurrency: 3,
            jitter: 0.1,
        }
    }
}

/// A set of knobs the adaptive limit cannot run with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AdaptiveError {
    /// A limit is zero, or they are out of order.
    #[error("adaptive limit: need 1 <= min limit ({min}) <= initial limit ({initial}) <= max limit ({max})")]
    Limits {
        /// `min_limit`.
        min: usize,
        /// `initial_limit`.
        initial: usize,
        /// `max_limit`.
        max: usize,
    },
    /// `min_concurrency` outside 1..=`max_limit`.
    #[error("adaptive limit: min concurrency {0} must be between 1 and the max limit")]
    MinConcurrency(usize),
    /// A window or interval of zero.
    #[error("adaptive limit: {0} must be above zero")]
    ZeroWindow(&'static str),
    /// A ratio outside its range.
    #[error("adaptive limit: {name} {value} is out of range ({range})")]
    Ratio {
        /// The knob.
        name: &'static str,
        /// Its value.
        value: f64,
        /// Its range.
        range: &'static str,
    },
}

impl AdaptiveSettings {
    /// Checks the knobs (the error names the first one wrong).
    pub fn validate(&self) -> Result<(), AdaptiveError> {
        if self.min_limit == 0
            || self.min_limit > self.initial_limit
            || self.initial_limit > self.max_limit
        {
            return Err(AdaptiveError::Limits {
                min: self.min_limit,
                initial: self.initial_limit,
                max: self.max_limit,
            });
        }
        if self.min_concurrency == 0 || self.min_concurrency > self.max_limit {
            return Err(AdaptiveError::MinConcurrency(self.min_concurrency));
        }
        if self.sample_window.is_zero() {
            return Err(AdaptiveError::ZeroWindow("the sample window"));
        }
        if self.min_rtt_interval.is_zero() {
            return Err(AdaptiveError::ZeroWindow("the min-rtt interval"));
        }
        if self.min_rtt_requests == 0 {
            return Err(AdaptiveError::ZeroWindow("the min-rtt request count"));
        }
        let ratio = |name, value: f64, ok: bool, range| {
            if ok && value.is_finite() {
                Ok(())
            } else {
                Err(AdaptiveError::Ratio { name, value, range })
            }
        };
        ratio(
            "percentile",
            self.percentile,
            self.percentile > 0.0 && self.percentile <= 1.0,
            "0 < p <= 1",
        )?;
        ratio(
            "tolerance",
            self.tolerance,
            (1.0..=10.0).contains(&self.tolerance),
            "1 <= t <= 10",
        )?;
        ratio(
            "smoothing",
            self.smoothing,
            self.smoothing > 0.0 && self.smoothing <= 1.0,
            "0 < s <= 1",
        )?;
        ratio(
            "jitter",
            self.jitter,
            (0.0..1.0).contains(&self.jitter),
            "0 <= j < 1",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_valid_and_bad_knobs_are_named() {
        AdaptiveSettings::default().validate().unwrap();
        let bad = AdaptiveSettings {
            min_limit: 10,
            initial_limit: 5,
            ..AdaptiveSettings::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "adaptive limit: need 1 <= min limit (10) <= initial limit (5) <= max limit (1000)"
        );
        let bad = AdaptiveSettings {
            tolerance: 0.5,
            ..AdaptiveSettings::default()
        };
        assert_eq!(
            bad.validate().unwrap_err().to_string(),
            "adaptive limit: tolerance 0.5 is out of range (1 <= t <= 10)"
        );
        let bad = AdaptiveSettings {
            percentile: f64::NAN,
            ..AdaptiveSettings::default()
        };
        assert!(bad.validate().is_err());
        let bad = AdaptiveSettings {
            sample_window: Duration::ZERO,
            ..AdaptiveSettings::default()
        };
        assert!(bad.validate().is_err());
    }
}
