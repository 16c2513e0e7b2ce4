//! Counters and gauges every request writes, sharded by thread: the requests by API and
//! result, and the HTTP requests in flight. Each thread adds into a cache line of its own
//! (`thread_shard.rs`), and a scrape adds the shards up, so no two cores write one line on
//! a request's path (one shared line took a contended atomic each on every request: issue
//! 31). They are `prometheus_client` counters and gauges over these atomics, registered and
//! encoded as any other; only a few exist (a fixed set of labels), so the shards' memory
//! (64 bytes a thread a series) stays small. Per-rule counters stay plain: a rule set may
//! hold thousands. The in-flight gauge's own calls (`Metrics::http_request_started` and
//! the rest) are here too.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use prometheus_client::metrics::counter::{self, Counter};
use prometheus_client::metrics::gauge::{self, Gauge};

use super::Metrics;
use crate::thread_shard;

/// A counter every request writes (`weir_requests_total`).
pub(crate) type HotCounter = Counter<u64, ShardedU64>;

/// A gauge every request moves (`weir_http_requests_in_flight`).
pub(crate) type HotGauge = Gauge<i64, ShardedI64>;

/// One HTTP request being handled ([`Metrics::http_request_started`]); dropping it ends
/// the count.
///
/// [`Metrics::http_request_started`]: super::Metrics::http_request_started
#[derive(Debug)]
pub struct InFlight<'a>(pub(crate) &'a HotGauge);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.dec();
    }
}

impl Metrics {
    /// Counts an HTTP request as being handled until the returned guard is dropped.
    pub fn http_request_started(&self) -> InFlight<'_> {
        self.in_flight.inc();
        InFlight(&self.in_flight)
    }

    /// One HTTP request begun, for a caller that holds the metrics by `Arc` and cannot keep
    /// an [`InFlight`] borrowing them (`weir proxy`'s counting future): it calls
    /// [`Metrics::http_request_ended`] exactly once when the request ends.
    pub fn http_request_begun(&self) {
        self.in_flight.inc();
    }

    /// The end of a request begun by [`Metrics::http_request_begun`].
    pub fn http_request_ended(&self) {
        self.in_flight.dec();
    }

    /// HTTP requests being handled now.
    pub fn http_in_flight(&self) -> i64 {
        self.in_flight.get()
    }
}

/// One shard, alone on its cache line.
#[derive(Debug, Default)]
#[repr(align(64))]
struct Line<A>(A);

/// An atomic kept in shards by thread, one cache line each; its value is their sum.
#[derive(Debug)]
pub struct Sharded<A>(Box<[Line<A>]>);

impl<A: Default> Default for Sharded<A> {
    fn default() -> Self {
        Self(
            (0..thread_shard::shard_count())
                .map(|_| Line::default())
                .collect(),
        )
    }
}

impl<A> Sharded<A> {
    /// This thread's shard.
    fn here(&self) -> Option<&A> {
        self.0
            .get(thread_shard::this_thread(self.0.len()))
            .map(|line| &line.0)
    }

    fn shards(&self) -> impl Iterator<Item = &A> {
        self.0.iter().map(|line| &line.0)
    }
}

/// A `u64` counted in shards by thread.
pub type ShardedU64 = Sharded<AtomicU64>;

/// An `i64` moved in shards by thread (a shard may go negative when one thread starts what
/// another ends).
pub type ShardedI64 = Sharded<AtomicI64>;

impl counter::Atomic<u64> for ShardedU64 {
    fn inc(&self) -> u64 {
        self.inc_by(1)
    }

    fn inc_by(&self, v: u64) -> u64 {
        self.here()
            .map_or(0, |shard| shard.fetch_add(v, Ordering::Relaxed))
    }

    fn get(&self) -> u64 {
        self.shards().fold(0_u64, |sum, shard| {
            sum.wrapping_add(shard.load(Ordering::Relaxed))
        })
    }
}

impl gauge::Atomic<i64> for ShardedI64 {
    fn inc(&self) -> i64 {
        self.inc_by(1)
    }

    fn inc_by(&self, v: i64) -> i64 {
        self.here()
            .map_or(0, |shard| shard.fetch_add(v, Ordering::Relaxed))
    }

    fn dec(&self) -> i64 {
        self.dec_by(1)
    }

    fn dec_by(&self, v: i64) -> i64 {
        self.here()
            .map_or(0, |shard| shard.fetch_sub(v, Ordering::Relaxed))
    }

    /// Sets the sum: this thread's shard takes the value, the others are zeroed (not atomic
    /// with their concurrent moves; no request-path gauge is ever set).
    fn set(&self, v: i64) -> i64 {
        let before = self.get();
        let here = thread_shard::this_thread(self.0.len());
        for (i, shard) in self.shards().enumerate() {
            shard.store(if i == here { v } else { 0 }, Ordering::Relaxed);
        }
        before
    }

    fn get(&self) -> i64 {
        self.shards().fold(0_i64, |sum, shard| {
            sum.wrapping_add(shard.load(Ordering::Relaxed))
        })
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::encoding::text::encode;
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn threads_count_apart_and_a_scrape_sees_the_sum() {
        let (requests, in_flight) = (HotCounter::default(), HotGauge::default());
        let mut registry = Registry::default();
        registry.register("requests", "", requests.clone());
        registry.register("in_flight", "", in_flight.clone());
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        requests.inc();
                        in_flight.inc();
                    }
                });
            }
        });
        // Ended on another thread than the one that started them.
        std::thread::scope(|s| {
            s.spawn(|| in_flight.dec_by(7990));
        });
        assert_eq!(requests.get(), 8000);
        assert_eq!(in_flight.get(), 10);
        in_flight.set(3);
        assert_eq!(in_flight.get(), 3);
        let mut text = String::new();
        encode(&mut text, &registry).unwrap();
        assert!(text.contains("requests_total 8000"), "{text}");
        assert!(text.contains("in_flight 3"), "{text}");
    }
}
