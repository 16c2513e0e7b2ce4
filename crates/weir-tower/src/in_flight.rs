//! The in-flight limit's settings and figures: at most N requests inside the inner service
//! (a weak backend's concurrency) at once, N fixed ([`InFlightLimit::fixed`]) or found by
//! measuring the backend's latency ([`InFlightLimit::adaptive`], the gradient controller
//! of `weir_core::adaptive`). A request that finds the limit reached waits in a bounded
//! line, higher priorities first, for up to a max wait; then it is shed (`503`, or the
//! fallback when the limits say degrade). The gate that does this is `gate.rs`; it runs
//! after the rate limits allowed a request, just before the inner service is called.

use std::time::Duration;

use weir_core::adaptive::{AdaptiveError, AdaptiveSettings};

/// Settings of the in-flight limit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InFlightLimit {
    /// At most this many requests inside the inner service at once (≥ 1). With
    /// `adaptive`, the adaptive limit moves below this cap (its `max_limit`).
    pub max_in_flight: usize,
    /// At most this many waiting for a slot; past it, the lowest priority waiting (or the
    /// newcomer, when it is no higher) is shed. 0: shed at once.
    pub max_queued: usize,
    /// The longest a request waits for a slot.
    pub max_wait: Duration,
    /// Find the limit by measuring the backend's latency (none: `max_in_flight` is fixed).
    pub adaptive: Option<AdaptiveSettings>,
}

impl InFlightLimit {
    /// A fixed limit of `max_in_flight`, with a line of `max_queued` waiting up to
    /// `max_wait`.
    pub fn fixed(max_in_flight: usize, max_queued: usize, max_wait: Duration) -> Self {
        Self {
            max_in_flight,
            max_queued,
            max_wait,
            adaptive: None,
        }
    }

    /// An adaptive limit with `settings` (see `weir_core::adaptive::GradientLimit`:
    /// it measures the backend's unloaded latency, then moves the limit by how much slower
    /// than that its answers come), with a line of `max_queued` waiting up to `max_wait`.
    ///
    /// Fails when the knobs do not validate ([`AdaptiveSettings::validate`]).
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{adaptive::AdaptiveSettings, Rule};
    /// use weir_tower::{InFlightLimit, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::per_ip(Rule::per_second(100)?)?.max_in_flight(
    ///     InFlightLimit::adaptive(AdaptiveSettings::default(), 256, Duration::from_secs(2))?,
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn adaptive(
        settings: AdaptiveSettings,
        max_queued: usize,
        max_wait: Duration,
    ) -> Result<Self, AdaptiveError> {
        settings.validate()?;
        Ok(Self {
            max_in_flight: settings.max_limit,
            max_queued,
            max_wait,
            adaptive: Some(settings),
        })
    }
}

/// The in-flight limit's figures now, for metrics and dashboards.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InFlightStats {
    /// The limit in force (the fixed one, or the adaptive one's current value).
    pub limit: usize,
    /// Requests inside the inner service.
    pub in_flight: usize,
    /// Requests waiting for a slot.
    pub queued: usize,
    /// Adaptive only: the backend's measured unloaded latency.
    pub min_rtt: Option<Duration>,
    /// Adaptive only: the latest window's sampled latency.
    pub sample_rtt: Option<Duration>,
    /// Adaptive only: whether the unloaded latency is being measured now.
    pub measuring: bool,
    /// Requests shed (queue full, pushed out by a higher priority, or waited too long),
    /// by priority, for the priorities that shed any; lowest priority first.
    pub shed: Vec<(u8, u64)>,
    /// Requests admitted, by priority, for the priorities that had any.
    pub admitted: Vec<(u8, u64)>,
}
