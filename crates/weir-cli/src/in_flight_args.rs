//! `weir proxy`'s in-flight options: `--max-in-flight N|auto`, the adaptive limit's knobs
//! (each also a `WEIR_ADAPTIVE_*` environment variable) and `--class-priority`, turned
//! into `weir_tower::InFlightLimit` and the proxy's class priorities. The algorithm is
//! `weir_core::adaptive` (docs/adaptive-concurrency.md); the gate is `weir-tower`'s.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use weir_core::adaptive::AdaptiveSettings;
use weir_tower::InFlightLimit;

use crate::duration::parse_duration;

/// `--max-in-flight`: a number, or `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MaxInFlight {
    /// At most this many.
    Fixed(usize),
    /// Found by measuring the upstream's latency.
    Auto,
}

impl FromStr for MaxInFlight {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        match text.parse::<usize>() {
            Ok(n) if (1..=1_000_000).contains(&n) => Ok(Self::Fixed(n)),
            _ => Err(format!(
                "'{text}': write a number from 1 to 1000000, or auto (found by measuring the upstream's latency)"
            )),
        }
    }
}

/// The in-flight options of `weir proxy`.
#[derive(Debug, Args)]
pub(crate) struct InFlightArgs {
    /// At most N requests inside the upstream at once (its concurrency), or `auto`: found
    /// and followed by measuring the upstream's latency (the --adaptive-* knobs; see
    /// "Adaptive in-flight limit" below) [default: no bound]
    #[arg(long, value_name = "N|auto", env = "WEIR_MAX_IN_FLIGHT")]
    pub(crate) max_in_flight: Option<MaxInFlight>,

    /// With --max-in-flight: how many requests may wait for a slot (0: none waits); past it
    /// the lowest priority waiting is shed (503 with Retry-After: 1, or the fallback with
    /// --on-limit degrade)
    #[arg(long, value_name = "N", env = "WEIR_IN_FLIGHT_QUEUE", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub(crate) in_flight_queue: u64,

    /// With --max-in-flight: the longest a request waits for a slot (then 503 with
    /// Retry-After: 1, or the fallback with --on-limit degrade)
    #[arg(long, value_name = "DURATION", env = "WEIR_IN_FLIGHT_WAIT", default_value = "5s",
          value_parser = parse_duration)]
    pub(crate) in_flight_wait: Duration,

    /// A class's priority at the in-flight limit, NAME=0..255 (higher goes first; a full
    /// line sheds the lowest). Unlisted classes (reader too) are 1, the built-in crawler
    /// class 0. Repeat for more, e.g. --class-priority partner=2
    #[arg(long = "class-priority", value_name = "NAME=N")]
    pub(crate) class_priorities: Vec<String>,

    /// With --max-in-flight auto: the limit once the first measurement of the upstream's
    /// unloaded latency is over; from then on each --adaptive-window moves it
    #[arg(long, value_name = "N", env = "WEIR_ADAPTIVE_INITIAL_LIMIT", default_value_t = AdaptiveSettings::default().initial_limit)]
    adaptive_initial_limit: usize,

    /// With --max-in-flight auto: the limit never goes below this
    #[arg(long, value_name = "N", env = "WEIR_ADAPTIVE_MIN_LIMIT", default_value_t = AdaptiveSettings::default().min_limit)]
    adaptive_min_limit: usize,

    /// With --max-in-flight auto: the limit never goes above this
    #[arg(long, value_name = "N", env = "WEIR_ADAPTIVE_MAX_LIMIT", default_value_t = AdaptiveSettings::default().max_limit)]
    adaptive_max_limit: usize,

    /// With --max-in-flight auto: the short window; answers are gathered this long, then
    /// the limit moves once
    #[arg(long, value_name = "DURATION", env = "WEIR_ADAPTIVE_WINDOW", default_value = "100ms",
          value_parser = parse_duration)]
    adaptive_window: Duration,

    /// With --max-in-flight auto: the percentile of a window's latencies compared with the
    /// unloaded latency, above 0 and at most 1 (0.5 = the median, 0.9 = p90)
    #[arg(long, value_name = "P", env = "WEIR_ADAPTIVE_PERCENTILE", default_value_t = AdaptiveSettings::default().percentile)]
    adaptive_percentile: f64,

    /// With --max-in-flight auto: how much slower than unloaded the upstream may answer
    /// before the limit comes down (1.25 = 25 % slower). Higher: more in flight, more latency
    #[arg(long, value_name = "RATIO", env = "WEIR_ADAPTIVE_TOLERANCE", default_value_t = AdaptiveSettings::default().tolerance)]
    adaptive_tolerance: f64,

    /// With --max-in-flight auto: how far one window moves the limit towards its new value
    /// (1 = all the way; 0.2 = a fifth, steadier and slower)
    #[arg(long, value_name = "S", env = "WEIR_ADAPTIVE_SMOOTHING", default_value_t = AdaptiveSettings::default().smoothing)]
    adaptive_smoothing: f64,

    /// With --max-in-flight auto: the long window; the unloaded latency is measured again
    /// this often (plus up to --adaptive-jitter of it). While it is measured the limit is
    /// --adaptive-min-concurrency: requests over it wait or are shed as at any limit
    #[arg(long, value_name = "DURATION", env = "WEIR_ADAPTIVE_MIN_RTT_INTERVAL", default_value = "30s",
          value_parser = parse_duration)]
    adaptive_min_rtt_interval: Duration,

    /// With --max-in-flight auto: answers taken for each measurement of the unloaded latency
    #[arg(long, value_name = "N", env = "WEIR_ADAPTIVE_MIN_RTT_REQUESTS", default_value_t = AdaptiveSettings::default().min_rtt_requests)]
    adaptive_min_rtt_requests: usize,

    /// With --max-in-flight auto: the limit while the unloaded latency is measured (low
    /// enough that nothing queues inside the upstream)
    #[arg(long, value_name = "N", env = "WEIR_ADAPTIVE_MIN_CONCURRENCY", default_value_t = AdaptiveSettings::default().min_concurrency)]
    adaptive_min_concurrency: usize,

    /// With --max-in-flight auto: spreads the measurements by up to this share of the
    /// interval (0.1 = 10 %), so proxies in front of one upstream do not measure at once
    #[arg(long, value_name = "J", env = "WEIR_ADAPTIVE_JITTER", default_value_t = AdaptiveSettings::default().jitter)]
    adaptive_jitter: f64,
}

impl InFlightArgs {
    /// The in-flight limit asked for, if any (bad adaptive knobs are an error naming the
    /// knob).
    pub(crate) fn limit(&self) -> anyhow::Result<Option<InFlightLimit>> {
        let max_queued = usize::try_from(self.in_flight_queue).unwrap_or(usize::MAX);
        Ok(match self.max_in_flight {
            None => None,
            Some(MaxInFlight::Fixed(n)) => {
                Some(InFlightLimit::fixed(n, max_queued, self.in_flight_wait))
            }
            Some(MaxInFlight::Auto) => Some(
                InFlightLimit::adaptive(self.adaptive(), max_queued, self.in_flight_wait)
                    .context("--max-in-flight auto")?,
            ),
        })
    }

    fn adaptive(&self) -> AdaptiveSettings {
        AdaptiveSettings {
            initial_limit: self.adaptive_initial_limit,
            min_limit: self.adaptive_min_limit,
            max_limit: self.adaptive_max_limit,
            sample_window: self.adaptive_window,
            percentile: self.adaptive_percentile,
            tolerance: self.adaptive_tolerance,
            smoothing: self.adaptive_smoothing,
            min_rtt_interval: self.adaptive_min_rtt_interval,
            min_rtt_requests: self.adaptive_min_rtt_requests,
            min_concurrency: self.adaptive_min_concurrency,
            jitter: self.adaptive_jitter,
        }
    }

    /// `--class-priority` as a map, over `defaults` (the built-in crawler class's 0).
    pub(crate) fn priorities(
        &self,
        mut defaults: HashMap<String, u8>,
    ) -> anyhow::Result<HashMap<String, u8>> {
        let mut seen = Vec::new();
        for pair in &self.class_priorities {
            let (name, n) = pair
                .split_once('=')
                .with_context(|| format!("--class-priority {pair:?}: write NAME=N"))?;
            let name = name.trim().to_string();
            let n: u8 = n.trim().parse().with_context(|| {
                format!("--class-priority {pair:?}: the priority is a number from 0 to 255")
            })?;
            if seen.contains(&name) {
                bail!("--class-priority: class {name:?} given twice");
            }
            seen.push(name.clone());
            defaults.insert(name, n);
        }
        Ok(defaults)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_in_flight_is_a_number_or_auto() {
        assert_eq!("8".parse(), Ok(MaxInFlight::Fixed(8)));
        assert_eq!("AUTO".parse(), Ok(MaxInFlight::Auto));
        let e = "0".parse::<MaxInFlight>().unwrap_err();
        assert_eq!(
            e,
            "'0': write a number from 1 to 1000000, or auto (found by measuring the upstream's latency)"
        );
        assert!("eight".parse::<MaxInFlight>().is_err());
    }
}
