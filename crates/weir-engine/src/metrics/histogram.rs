//! [`Latency`]: the latency histograms on the decision path (`weir_store_duration`, one
//! observation per store call; `weir_request_duration`, one per request), as classic
//! Prometheus histograms whose observation takes no lock.
//!
//! `prometheus_client`'s `Histogram` takes a mutex on every observation: on the hot path
//! of every request, shared by every worker thread. Here an observation is a search of
//! the bucket bounds (whole nanoseconds) and two relaxed atomic adds on this thread's
//! shard of the counters (`thread_shard.rs`: two workers never write one cache line,
//! which a pipelined RESP flood paid 5-6 % of its CPU for); a scrape adds the shards up
//! counter by counter. The count is the buckets' sum, not a counter of its own, so the
//! series always agree with each other; a scrape racing an observation may see its bucket
//! without its share of the sum, as any lock-free Prometheus client may (every counter
//! only grows).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};

use crate::thread_shard;

/// A latency histogram in seconds (cheap to clone: one `Arc`).
#[derive(Debug, Clone)]
pub(crate) struct Latency {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The buckets' upper bounds in seconds, as exposed.
    bounds: Box<[f64]>,
    /// The same in nanoseconds, rounded down: an observation of `n` ns is in the first
    /// bucket whose bound is at least `n` (as `le` means).
    bounds_ns: Box<[u64]>,
    /// One set of counters a writing thread.
    shards: Box<[Counts]>,
}

/// One thread's counters, on cache lines of their own.
#[derive(Debug)]
#[repr(align(128))]
struct Counts {
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    buckets: Box<[AtomicU64]>,
    sum_ns: AtomicU64,
}

impl Inner {
    /// Bucket `i`'s observations, every shard's added up.
    fn bucket(&self, i: usize) -> u64 {
        self.shards
            .iter()
            .filter_map(|s| s.buckets.get(i))
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }

    /// The sum of the observations in nanoseconds, every shard's added up.
    fn sum_ns(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.sum_ns.load(Ordering::Relaxed))
            .fold(0, u64::wrapping_add)
    }
}

impl Latency {
    /// `buckets` exponential buckets from `start` seconds, each `factor` times the last,
    /// and `+Inf` (as `prometheus_client::metrics::histogram::exponential_buckets`).
    pub(crate) fn exponential(start: f64, factor: f64, buckets: u16) -> Self {
        let bounds: Box<[f64]> = (0..i32::from(buckets))
            .map(|i| start * factor.powi(i))
            .collect();
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        // Bounds are positive seconds: the cast rounds down and saturates, never wraps.
        let bounds_ns = bounds.iter().map(|s| (s * 1e9) as u64).collect();
        let shards = (0..thread_shard::shard_count())
            .map(|_| Counts {
                buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
                sum_ns: AtomicU64::new(0),
            })
            .collect();
        Self {
            inner: Arc::new(Inner {
                bounds,
                bounds_ns,
                shards,
            }),
        }
    }

    /// Records one observation.
    pub(crate) fn observe(&self, took: Duration) {
        let inner = &*self.inner;
        let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        let bucket = inner.bounds_ns.partition_point(|&bound| bound < ns);
        let Some(shard) = inner
            .shards
            .get(thread_shard::this_thread(inner.shards.len()))
        else {
            return;
        };
        if let Some(count) = shard.buckets.get(bucket) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        shard.sum_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Observations so far, and their sum.
    #[cfg(test)]
    fn totals(&self) -> (u64, Duration) {
        let inner = &*self.inner;
        let count = (0..=inner.bounds.len()).map(|i| inner.bucket(i)).sum();
        (count, Duration::from_nanos(inner.sum_ns()))
    }
}

impl TypedMetric for Latency {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for Latency {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let inner = &*self.inner;
        let buckets: Vec<(f64, u64)> = inner
            .bounds
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip((0..=inner.bounds.len()).map(|i| inner.bucket(i)))
            .collect();
        // The count as the buckets add up, so the series agree with each other even when
        // observations race the scrape.
        let count = buckets.iter().map(|(_, n)| n).sum();
        #[allow(clippy::cast_precision_loss)] // seconds as a float, as exposed
        let sum = inner.sum_ns() as f64 / 1e9;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::{Registry, Unit};

    use super::*;

    fn render(latency: &Latency) -> String {
        let mut registry = Registry::default();
        registry.register_with_unit("t", "test", Unit::Seconds, latency.clone());
        let mut out = String::new();
        encode(&mut out, &registry).unwrap_or_else(|e| panic!("{e}"));
        out
    }

    /// The same exposition as `prometheus_client`'s own histogram for the same
    /// observations: bounds, cumulative buckets, `le` inclusive, count and sum.
    #[test]
    fn it_exposes_what_prometheus_clients_histogram_exposes() {
        use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
        let ours = Latency::exponential(0.000_1, 2.0, 16);
        let theirs = Histogram::new(exponential_buckets(0.000_1, 2.0, 16));
        for us in [
            0, 50, 100, 101, 150, 200, 799, 800, 5_000, 3_000_000, 10_000_000,
        ] {
            let took = Duration::from_micros(us);
            ours.observe(took);
            theirs.observe(took.as_secs_f64());
        }
        let mut registry = Registry::default();
        registry.register_with_unit("t", "test", Unit::Seconds, theirs);
        let mut expected = String::new();
        encode(&mut expected, &registry).unwrap_or_else(|e| panic!("{e}"));
        let bucket_lines = |text: &str| -> Vec<String> {
            text.lines()
                .filter(|l| l.contains("_bucket") || l.contains("_count"))
                .map(str::to_string)
                .collect()
        };
        let rendered = render(&ours);
        assert_eq!(
            bucket_lines(&rendered),
            bucket_lines(&expected),
            "{rendered}"
        );
        assert!(
            rendered.contains("# TYPE t_seconds histogram"),
            "{rendered}"
        );
        assert!(rendered.contains("t_seconds_sum 13.0072"), "{rendered}");
        assert_eq!(ours.totals(), (11, Duration::from_micros(13_007_200)));
    }

    #[test]
    fn observations_from_many_threads_are_all_counted() {
        let latency = Latency::exponential(0.000_025, 2.0, 16);
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let latency = &latency;
                s.spawn(move || {
                    for i in 0..10_000u64 {
                        latency.observe(Duration::from_nanos(i * 97 + t));
                    }
                });
            }
        });
        let (count, _) = latency.totals();
        assert_eq!(count, 40_000);
        let rendered = render(&latency);
        assert!(
            rendered.contains("t_seconds_bucket{le=\"+Inf\"} 40000"),
            "{rendered}"
        );
    }
}
