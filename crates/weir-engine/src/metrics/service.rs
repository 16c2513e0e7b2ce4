//! envoyproxy/ratelimit's service-level series, beside its per-rule hits (`hits.rs`): what
//! its `ServerReporter` and `ServiceStats` count, under the names its Prometheus mapping
//! (`src/stats/prom/default_mapper.yaml`) gives them and the statsd names they have
//! upstream:
//!
//! | Prometheus | statsd | counts |
//! | --- | --- | --- |
//! | `ratelimit_service_total_requests{grpc_method="ShouldRateLimit"}` | `ratelimit_server.ShouldRateLimit.total_requests` | gRPC `ShouldRateLimit` calls |
//! | `ratelimit_service_response_time_seconds{grpc_method="ShouldRateLimit"}` (histogram) | `ratelimit_server.ShouldRateLimit.response_time` (timer, ms) | how long each took |
//! | `ratelimit_service_should_rate_limit_error{err_type}` | `ratelimit.service.call.should_rate_limit.{redis_error,service_error}` | calls answered with an error: the store failed / the request was refused |
//! | `ratelimit_service_global_shadow_mode` | `ratelimit.service.global_shadow_mode` | requests over the limit answered `OK` by the global shadow mode |
//! | `ratelimit_service_config_load_success` / `_error` | `ratelimit.service.config_load_success` / `_error` | rule loads (the first included) |
//!
//! Counters keep upstream's names: the Prometheus text format serves them as they are, the
//! OpenMetrics one with the `_total` its specification requires (`exposition.rs`). The
//! response-time histogram is the gRPC series of `weir_request_duration_seconds` itself,
//! exposed once more under upstream's name: one observation feeds both. Each counter also
//! keeps its count since the last statsd flush ([`Stat::take`]); the timer keeps the last
//! [`TIMINGS`] durations since the flush ([`Timings`]), sent with their sampling rate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family, MetricConstructor};
use prometheus_client::registry::Registry;

use super::histogram::Latency;

/// The gRPC method ratelimit's server series are labelled with.
pub(crate) const SHOULD_RATE_LIMIT: &str = "ShouldRateLimit";

/// The counter families whose names ratelimit's dashboards query without `_total`.
pub(crate) const BARE_COUNTERS: [&str; 10] = [
    "ratelimit_service_rate_limit_total_hits",
    "ratelimit_service_rate_limit_over_limit",
    "ratelimit_service_rate_limit_near_limit",
    "ratelimit_service_rate_limit_within_limit",
    "ratelimit_service_rate_limit_shadow_mode",
    "ratelimit_service_total_requests",
    "ratelimit_service_should_rate_limit_error",
    "ratelimit_service_global_shadow_mode",
    "ratelimit_service_config_load_success",
    "ratelimit_service_config_load_error",
];

/// How many durations a statsd flush sends at most (the latest; a sampling rate says how
/// many there were).
pub(crate) const TIMINGS: usize = 256;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct MethodLabels {
    grpc_method: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ErrorLabels {
    err_type: &'static str,
}

/// A counter under ratelimit's name, and its count since the last statsd flush.
#[derive(Debug, Clone, Default)]
pub(crate) struct Stat {
    counter: Counter,
    pending: Arc<AtomicU64>,
}

impl Stat {
    fn of(counter: Counter) -> Stat {
        Stat {
            counter,
            pending: Arc::default(),
        }
    }

    pub(crate) fn inc(&self) {
        self.counter.inc();
        self.pending.fetch_add(1, Ordering::Relaxed);
    }

    /// The count since the last call (reset to zero).
    pub(crate) fn take(&self) -> u64 {
        self.pending.swap(0, Ordering::Relaxed)
    }

    #[cfg(test)]
    pub(crate) fn get(&self) -> u64 {
        self.counter.get()
    }
}

/// The latest durations since the last statsd flush, in whole milliseconds (as
/// ratelimit's timer sends them): a ring of [`TIMINGS`] slots written without a lock. A
/// duration recorded while a flush reads the ring may be sent in this flush or the next.
#[derive(Debug)]
pub(crate) struct Timings {
    slots: [AtomicU64; TIMINGS],
    seen: AtomicU64,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
            seen: AtomicU64::new(0),
        }
    }
}

impl Timings {
    pub(crate) fn record(&self, took: Duration) {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        let n = self.seen.fetch_add(1, Ordering::Relaxed);
        let slot = usize::try_from(n % TIMINGS as u64).unwrap_or(0);
        if let Some(slot) = self.slots.get(slot) {
            slot.store(ms, Ordering::Relaxed);
        }
    }

    /// The durations kept since the last call, in ms, and the share of all recorded they
    /// are (statsd's sampling rate: 1 when none was overwritten).
    pub(crate) fn take(&self) -> (Vec<u64>, f64) {
        let seen = self.seen.swap(0, Ordering::Relaxed);
        let kept = usize::try_from(seen).unwrap_or(usize::MAX).min(TIMINGS);
        let values = self
            .slots
            .iter()
            .take(kept)
            .map(|s| s.load(Ordering::Relaxed))
            .collect();
        #[allow(clippy::cast_precision_loss)] // a ratio of two counts
        let rate = if seen == 0 {
            1.0
        } else {
            kept as f64 / seen as f64
        };
        (values, rate)
    }
}

/// `Family::new_with_constructor` handing out one existing histogram.
#[derive(Debug, Clone)]
struct Same(Latency);

impl MetricConstructor<Latency> for Same {
    fn new_metric(&self) -> Latency {
        self.0.clone()
    }
}

/// ratelimit's service-level series, registered once.
#[derive(Debug, Clone)]
pub(crate) struct ServiceFamilies {
    pub(crate) total_requests: Stat,
    pub(crate) response_times: Arc<Timings>,
    pub(crate) redis_error: Stat,
    pub(crate) service_error: Stat,
    pub(crate) global_shadow: Stat,
    pub(crate) load_success: Stat,
    pub(crate) load_error: Stat,
}

impl ServiceFamilies {
    /// Registers the series in `registry`; `grpc_latency` is the gRPC request histogram,
    /// exposed once more as ratelimit's response time.
    pub(crate) fn register(registry: &mut Registry, grpc_latency: &Latency) -> ServiceFamilies {
        let method = MethodLabels {
            grpc_method: SHOULD_RATE_LIMIT,
        };
        let requests = Family::<MethodLabels, Counter>::default();
        registry.register(
            "ratelimit_service_total_requests",
            "gRPC ShouldRateLimit calls (envoyproxy/ratelimit's name)",
            requests.clone(),
        );
        let response_time =
            Family::<MethodLabels, Latency, Same>::new_with_constructor(Same(grpc_latency.clone()));
        let _ = response_time.get_or_create(&method);
        registry.register(
            "ratelimit_service_response_time_seconds",
            "Time a gRPC ShouldRateLimit call took (envoyproxy/ratelimit's name; the same \
             observations as weir_request_duration_seconds with api grpc)",
            response_time,
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "ratelimit_service_should_rate_limit_error",
            "ShouldRateLimit calls answered with an error: redis_error the store failed, \
             service_error the request was refused (envoyproxy/ratelimit's name)",
            errors.clone(),
        );
        let single = |registry: &mut Registry, name: &str, help: &str| {
            let counter = Counter::default();
            registry.register(name, help, counter.clone());
            Stat::of(counter)
        };
        let error = |err_type| Stat::of(errors.get_or_create_owned(&ErrorLabels { err_type }));
        ServiceFamilies {
            total_requests: Stat::of(requests.get_or_create_owned(&method)),
            response_times: Arc::default(),
            redis_error: error("redis_error"),
            service_error: error("service_error"),
            global_shadow: single(
                registry,
                "ratelimit_service_global_shadow_mode",
                "Requests over the limit answered OK by the global shadow mode \
                 (envoyproxy/ratelimit's name)",
            ),
            load_success: single(
                registry,
                "ratelimit_service_config_load_success",
                "Rule loads that succeeded, the first included (envoyproxy/ratelimit's name)",
            ),
            load_error: single(
                registry,
                "ratelimit_service_config_load_error",
                "Rule loads that failed: the rules in force stayed (envoyproxy/ratelimit's name)",
            ),
        }
    }

    /// Counts a load of the rules (at start or a reload) as ratelimit does.
    pub(crate) fn config_loaded(&self, ok: bool) {
        if ok {
            self.load_success.inc();
        } else {
            self.load_error.inc();
        }
    }

    /// Counts one `ShouldRateLimit` call that ended with `result` (`ok`, `over_limit`,
    /// `invalid`, `error`).
    pub(crate) fn should_rate_limit(&self, result: &str) {
        self.total_requests.inc();
        match result {
            "invalid" => self.service_error.inc(),
            "error" => self.redis_error.inc(),
            _ => {}
        }
    }

    /// The statsd counters, with their names below the root, in the order they are sent.
    pub(crate) fn stats(&self) -> [(&'static str, &Stat); 6] {
        [
            (
                "ratelimit_server.ShouldRateLimit.total_requests",
                &self.total_requests,
            ),
            (
                "ratelimit.service.call.should_rate_limit.redis_error",
                &self.redis_error,
            ),
            (
                "ratelimit.service.call.should_rate_limit.service_error",
                &self.service_error,
            ),
            ("ratelimit.service.global_shadow_mode", &self.global_shadow),
            ("ratelimit.service.config_load_success", &self.load_success),
            ("ratelimit.service.config_load_error", &self.load_error),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_errors_and_loads_count_under_ratelimits_names() {
        let mut registry = Registry::default();
        let latency = Latency::exponential(0.000_1, 2.0, 4);
        let service = ServiceFamilies::register(&mut registry, &latency);
        for result in ["ok", "over_limit", "invalid", "error", "error"] {
            service.should_rate_limit(result);
        }
        service.config_loaded(true);
        service.config_loaded(false);
        service.global_shadow.inc();
        latency.observe(Duration::from_micros(150));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "ratelimit_service_total_requests_total{grpc_method=\"ShouldRateLimit\"} 5",
            "ratelimit_service_should_rate_limit_error_total{err_type=\"redis_error\"} 2",
            "ratelimit_service_should_rate_limit_error_total{err_type=\"service_error\"} 1",
            "ratelimit_service_global_shadow_mode_total 1",
            "ratelimit_service_config_load_success_total 1",
            "ratelimit_service_config_load_error_total 1",
            "ratelimit_service_response_time_seconds_count{grpc_method=\"ShouldRateLimit\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        // statsd's counts are the same, each taken once.
        let taken: Vec<(&str, u64)> = service.stats().map(|(n, s)| (n, s.take())).to_vec();
        assert_eq!(
            taken[0],
            ("ratelimit_server.ShouldRateLimit.total_requests", 5)
        );
        assert_eq!(taken[1].1, 2);
        assert_eq!(taken[2].1, 1);
        assert!(service.stats().iter().all(|(_, s)| s.take() == 0));
        assert_eq!(service.total_requests.get(), 5);
    }

    #[test]
    fn timings_keep_the_latest_and_say_how_many_there_were() {
        let timings = Timings::default();
        assert_eq!(timings.take(), (Vec::new(), 1.0));
        timings.record(Duration::from_micros(2_700));
        timings.record(Duration::from_millis(40));
        assert_eq!(timings.take(), (vec![2, 40], 1.0));
        for ms in 0..(TIMINGS as u64 * 2) {
            timings.record(Duration::from_millis(ms));
        }
        let (values, rate) = timings.take();
        assert_eq!(values.len(), TIMINGS);
        assert!(values.iter().all(|&ms| ms >= TIMINGS as u64), "the latest");
        assert!((rate - 0.5).abs() < f64::EPSILON);
    }
}
