//! [`GradientLimit`]: Envoy's adaptive-concurrency gradient controller as a pure state
//! machine. Fed one [`Sample`] per finished request (its round-trip time, the requests in
//! flight when it started, whether it was dropped) with the time it finished; answers the
//! limit in force. It never reads a clock and does no I/O: the caller's gate (the tower
//! layer's in-flight limit) times requests on its own clock and enforces the limit.
//!
//! Two alternating phases, as in Envoy:
//!
//! 1. **Measuring the minimum RTT** (at the start, then every `min_rtt_interval` plus
//!    jitter, and after 5 windows in a row at `min_limit`): the limit drops to `min_concurrency` so nothing queues in the backend, and
//!    the `percentile` of `min_rtt_requests` samples taken at that concurrency becomes
//!    the minimum RTT (the latency of an unloaded backend). The limit then returns to what
//!    it was (the first time: `initial_limit`).
//! 2. **Gradient windows** of `sample_window`: the window's `percentile` RTT is the
//!    sampled RTT, and the limit moves once:
//!    `gradient = clamp(tolerance × min_rtt / sampled_rtt, 0.5, 2)`,
//!    `target = gradient × limit + sqrt(gradient × limit)` (the square root is headroom,
//!    so the limit keeps probing upwards), then `limit += smoothing × (target − limit)`,
//!    clamped to `min_limit..=max_limit`. Two guards from Netflix's concurrency-limits: a
//!    window whose busiest moment used under half the limit does not raise it (an idle
//!    client proves nothing about the backend: Gradient2's "app limited"), and a window
//!    with a dropped request (the backend failed or timed out) lowers it by at least 10 %
//!    (AIMD's backoff).

use std::time::Duration;

use super::settings::{AdaptiveError, AdaptiveSettings};

/// Most RTTs kept per window; past it, later samples overwrite earlier ones in turn (so
/// memory is bounded whatever the request rate).
const MAX_WINDOW_SAMPLES: usize = 4096;

/// One finished request, as the gate saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// From the moment it went to the backend to its answer (head).
    pub rtt: Duration,
    /// Requests inside the backend when it went in, itself included.
    pub in_flight: usize,
    /// The backend failed it or it timed out: its RTT says nothing about queueing.
    pub dropped: bool,
}

/// What the limit knows now, for metrics and dashboards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveStats {
    /// The limit in force.
    pub limit: usize,
    /// The latest measured minimum RTT (none before the first measurement ends).
    pub min_rtt: Option<Duration>,
    /// The latest window's sampled RTT.
    pub sample_rtt: Option<Duration>,
    /// Whether the minimum RTT is being measured now (the limit is `min_concurrency`).
    pub measuring: bool,
    /// Windows closed so far (the limit moved this many times).
    pub windows: u64,
}

/// Where the machine is.
#[derive(Debug, Clone)]
enum Phase {
    /// Measuring the minimum RTT; the limit to return to afterwards.
    Measuring { samples: Vec<u64>, resume: f64 },
    /// Moving the limit once per window.
    Running,
}

/// The adaptive concurrency limit (Envoy's gradient controller). See the module docs for
/// the algorithm.
///
/// ```
/// use std::time::Duration;
/// use weir_core::adaptive::{AdaptiveSettings, GradientLimit, Sample};
///
/// let mut limit = GradientLimit::new(AdaptiveSettings::default())?;
/// assert_eq!(limit.limit(), 3); // measuring the minimum RTT first
/// let ms = 1_000_000;
/// for i in 0..25 {
///     let sample = Sample { rtt: Duration::from_millis(20), in_flight: 1, dropped: false };
///     limit.sample(i * 20 * ms, sample);
/// }
/// assert_eq!(limit.limit(), 8); // the initial limit, now that the floor is known
/// assert_eq!(limit.stats().min_rtt, Some(Duration::from_millis(20)));
/// # Ok::<(), weir_core::adaptive::AdaptiveError>(())
/// ```
#[derive(Debug, Clone)]
pub struct GradientLimit {
    settings: AdaptiveSettings,
    limit: f64,
    phase: Phase,
    min_rtt_ns: Option<u64>,
    sample_rtt_ns: Option<u64>,
    next_measure_ns: u64,
    window_end_ns: Option<u64>,
    window: Vec<u64>,
    window_seen: usize,
    window_busiest: usize,
    window_dropped: bool,
    measurements: u64,
    windows: u64,
    /// Windows in a row that ended at `min_limit`.
    at_floor: u32,
}

/// Windows in a row at `min_limit` after which the minimum RTT is measured again (as
/// Envoy does: a floor that stale pins the limit down).
const FLOOR_WINDOWS: u32 = 5;

impl GradientLimit {
    /// A limit with these knobs, measuring the minimum RTT first.
    pub fn new(settings: AdaptiveSettings) -> Result<Self, AdaptiveError> {
        settings.validate()?;
        Ok(Self {
            limit: count_to_f64(settings.initial_limit),
            phase: Phase::Measuring {
                samples: Vec::new(),
                resume: count_to_f64(settings.initial_limit),
            },
            settings,
            min_rtt_ns: None,
            sample_rtt_ns: None,
            next_measure_ns: 0,
            window_end_ns: None,
            window: Vec::new(),
            window_seen: 0,
            window_busiest: 0,
            window_dropped: false,
            measurements: 0,
            windows: 0,
            at_floor: 0,
        })
    }

    /// The knobs.
    pub fn settings(&self) -> &AdaptiveSettings {
        &self.settings
    }

    /// The limit in force: at most this many requests inside the backend (≥ 1).
    pub fn limit(&self) -> usize {
        match self.phase {
            Phase::Measuring { .. } => self.settings.min_concurrency,
            Phase::Running => f64_to_count(self.limit).max(1),
        }
    }

    /// What the limit knows now.
    pub fn stats(&self) -> AdaptiveStats {
        AdaptiveStats {
            limit: self.limit(),
            min_rtt: self.min_rtt_ns.map(Duration::from_nanos),
            sample_rtt: self.sample_rtt_ns.map(Duration::from_nanos),
            measuring: matches!(self.phase, Phase::Measuring { .. }),
            windows: self.windows,
        }
    }

    /// One finished request, which ended at `now_ns` (the caller's clock, nanoseconds).
    /// May move the limit (read it again with [`limit`](Self::limit)).
    pub fn sample(&mut self, now_ns: u64, sample: Sample) {
        let rtt_ns = u64::try_from(sample.rtt.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1);
        if let Phase::Measuring { samples, resume } = &mut self.phase {
            // A request that went in beside more than min_concurrency others (sent before
            // the measurement began) queued, and would inflate the floor.
            if !sample.dropped && sample.in_flight <= self.settings.min_concurrency {
                samples.push(rtt_ns);
            }
            if samples.len() >= self.settings.min_rtt_requests {
                let measured = percentile(samples, self.settings.percentile);
                self.limit = *resume;
                self.min_rtt_ns = Some(measured);
                self.phase = Phase::Running;
                self.measurements = self.measurements.saturating_add(1);
                self.next_measure_ns = now_ns.saturating_add(self.interval_ns());
                self.clear_window();
            }
            return;
        }
        let end = *self
            .window_end_ns
            .get_or_insert_with(|| now_ns.saturating_add(duration_ns(self.settings.sample_window)));
        if !sample.dropped {
            if self.window.len() < MAX_WINDOW_SAMPLES {
                self.window.push(rtt_ns);
            } else if let Some(slot) = self.window.get_mut(self.window_seen % MAX_WINDOW_SAMPLES) {
                *slot = rtt_ns;
            }
            self.window_seen = self.window_seen.saturating_add(1);
        }
        self.window_busiest = self.window_busiest.max(sample.in_flight);
        self.window_dropped |= sample.dropped;
        if now_ns >= end {
            self.close_window();
            if now_ns >= self.next_measure_ns || self.at_floor >= FLOOR_WINDOWS {
                self.at_floor = 0;
                self.phase = Phase::Measuring {
                    samples: Vec::new(),
                    resume: self.limit,
                };
            }
        }
    }

    /// Moves the limit once, from the window just closed.
    fn close_window(&mut self) {
        let old = self.limit;
        let mut target = old;
        if !self.window.is_empty() {
            let sampled = percentile(&mut self.window, self.settings.percentile);
            self.sample_rtt_ns = Some(sampled);
            // A window faster than the floor proves the floor lower.
            let min_rtt = self.min_rtt_ns.map_or(sampled, |m| m.min(sampled));
            self.min_rtt_ns = Some(min_rtt);
            let gradient = (self.settings.tolerance * u64_to_f64(min_rtt) / u64_to_f64(sampled))
                .clamp(0.5, 2.0);
            target = gradient * old + (gradient * old).sqrt();
            let app_limited = count_to_f64(self.window_busiest) < old / 2.0;
            if app_limited && target > old {
                target = old;
            }
        }
        if self.window_dropped {
            target = target.min(old * 0.9);
        }
        let new = old + self.settings.smoothing * (target - old);
        self.limit = new.clamp(
            count_to_f64(self.settings.min_limit),
            count_to_f64(self.settings.max_limit),
        );
        self.windows = self.windows.saturating_add(1);
        self.at_floor = if self.limit <= count_to_f64(self.settings.min_limit) {
            self.at_floor.saturating_add(1)
        } else {
            0
        };
        self.clear_window();
    }

    fn clear_window(&mut self) {
        self.window.clear();
        self.window_seen = 0;
        self.window_busiest = 0;
        self.window_dropped = false;
        self.window_end_ns = None;
    }

    /// The time to the next measurement: the interval plus up to `jitter` of it, drawn
    /// deterministically from the measurement's number (no random source: pure).
    fn interval_ns(&self) -> u64 {
        let interval = duration_ns(self.settings.min_rtt_interval);
        let fraction = u64_to_f64(splitmix(self.measurements) >> 11) / u64_to_f64(1 << 53);
        let extra = u64_to_f64(interval) * self.settings.jitter * fraction;
        interval.saturating_add(f64_to_u64(extra))
    }
}

/// The nearest-rank `p` percentile of `values` (sorted in place; 0 when empty).
pub(crate) fn percentile(values: &mut [u64], p: f64) -> u64 {
    values.sort_unstable();
    let rank = f64_to_count((p * count_to_f64(values.len())).ceil()).max(1);
    values
        .get(rank.saturating_sub(1).min(values.len().saturating_sub(1)))
        .copied()
        .unwrap_or(0)
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn splitmix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Counts and nanoseconds fit an f64's 53 bits for any value this module meets.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn count_to_f64(n: usize) -> f64 {
    n as f64
}

#[allow(clippy::cast_precision_loss)]
pub(crate) fn u64_to_f64(n: u64) -> f64 {
    n as f64
}

/// A non-negative finite f64 to a count, rounding down (NaN and negatives to 0, huge to
/// `usize::MAX`: `as` saturates, and the inputs are clamped limits).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(crate) fn f64_to_count(x: f64) -> usize {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        x as usize
    }
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub(crate) fn f64_to_u64(x: f64) -> u64 {
    if x.is_nan() || x <= 0.0 {
        0
    } else {
        x as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn at(rtt_ms: u64, in_flight: usize) -> Sample {
        Sample {
            rtt: Duration::from_millis(rtt_ms),
            in_flight,
            dropped: false,
        }
    }

    /// A limit past its first measurement (min RTT 20 ms), at `now` = 1 s.
    fn measured() -> GradientLimit {
        let mut limit = GradientLimit::new(AdaptiveSettings::default()).unwrap();
        for _ in 0..25 {
            limit.sample(1000 * MS, at(20, 1));
        }
        assert_eq!(limit.limit(), 8);
        limit
    }

    #[test]
    fn samples_that_queued_before_the_measurement_do_not_set_the_floor() {
        let mut limit = GradientLimit::new(AdaptiveSettings::default()).unwrap();
        for _ in 0..100 {
            limit.sample(0, at(500, 40));
        }
        assert!(limit.stats().measuring, "no sample at min concurrency yet");
        assert_eq!(limit.limit(), 3);
        for _ in 0..25 {
            limit.sample(MS, at(20, 3));
        }
        assert_eq!(limit.stats().min_rtt, Some(Duration::from_millis(20)));
    }

    #[test]
    fn a_fast_window_raises_the_limit_and_a_slow_one_lowers_it() {
        let mut limit = measured();
        for i in 0..5 {
            limit.sample(1000 * MS + i * 20 * MS, at(20, 8));
        }
        limit.sample(1101 * MS, at(20, 8));
        // gradient 1.25 × 8 = 10, plus sqrt(10) = 13.16
        assert_eq!(limit.limit(), 13);
        for i in 0..5 {
            limit.sample(1110 * MS + i * 20 * MS, at(80, 13));
        }
        limit.sample(1250 * MS, at(80, 13));
        // gradient floor 0.5: 13.16 × 0.5 + sqrt(6.58) = 9.14
        assert_eq!(limit.limit(), 9);
    }

    #[test]
    fn an_idle_client_does_not_raise_the_limit() {
        let mut limit = measured();
        for i in 0..10 {
            limit.sample(1000 * MS + i * 20 * MS, at(20, 1));
        }
        assert_eq!(limit.limit(), 8, "one request at a time proves nothing");
    }

    #[test]
    fn a_dropped_request_lowers_the_limit_by_a_tenth_at_least() {
        let mut limit = measured();
        limit.sample(1000 * MS, at(20, 8));
        limit.sample(
            1200 * MS,
            Sample {
                dropped: true,
                ..at(20, 8)
            },
        );
        assert_eq!(limit.limit(), 7, "8 × 0.9 = 7.2");
    }

    #[test]
    fn the_floor_is_measured_again_after_the_interval() {
        let mut limit = measured();
        let later = 1000 * MS + 40_000 * MS; // past 30 s + 10 % jitter
        limit.sample(later, at(20, 8));
        limit.sample(later + 200 * MS, at(20, 8));
        assert!(limit.stats().measuring);
        assert_eq!(limit.limit(), 3);
        for _ in 0..25 {
            limit.sample(later + 300 * MS, at(30, 2));
        }
        let stats = limit.stats();
        assert!(!stats.measuring);
        assert_eq!(stats.min_rtt, Some(Duration::from_millis(30)));
        assert!(stats.limit >= 8, "the limit returns to where it was");
    }

    #[test]
    fn five_windows_at_the_floor_measure_the_minimum_rtt_again() {
        let settings = AdaptiveSettings {
            min_limit: 4,
            ..AdaptiveSettings::default()
        };
        let mut limit = GradientLimit::new(settings).unwrap();
        for _ in 0..25 {
            limit.sample(1000 * MS, at(20, 1));
        }
        let mut now = 1000 * MS;
        let mut windows = 0;
        for _ in 0..20 {
            limit.sample(now, at(2000, 8));
            now += 200 * MS;
            limit.sample(now, at(2000, 8));
            windows += 1;
            if limit.stats().measuring {
                break;
            }
        }
        assert!(
            limit.stats().measuring,
            "a floor that pins the limit down is stale"
        );
        // 8 -> 6 -> 4.7 -> 4 (the floor), then five windows there.
        assert_eq!(windows, 7);
    }

    #[test]
    fn the_limit_stays_within_its_bounds() {
        let settings = AdaptiveSettings {
            min_limit: 4,
            initial_limit: 4,
            max_limit: 6,
            ..AdaptiveSettings::default()
        };
        let mut limit = GradientLimit::new(settings).unwrap();
        for _ in 0..25 {
            limit.sample(0, at(20, 1));
        }
        for w in 0..50 {
            limit.sample(w * 200 * MS, at(20, 6));
        }
        assert_eq!(limit.limit(), 6);
        for w in 50..100 {
            limit.sample(w * 200 * MS, at(2000, 6));
            // Between measurements of the floor (at min_concurrency, 3), within bounds.
            let stats = limit.stats();
            assert!(
                stats.measuring || (4..=6).contains(&stats.limit),
                "{stats:?}"
            );
        }
        assert!(
            limit.stats().measuring,
            "pinned at the floor: measured again"
        );
        assert_eq!(limit.limit(), 3);
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let mut v = vec![5, 1, 4, 2, 3];
        assert_eq!(percentile(&mut v, 0.5), 3);
        assert_eq!(percentile(&mut v, 1.0), 5);
        assert_eq!(percentile(&mut v, 0.01), 1);
    }
}
