//! [`Knee`]: a model of a backend that collapses under concurrency, for tests, `weir
//! simulate` and the benchmark's backend. Up to `knee` requests inside, each takes `base`;
//! past it every request slows down, and so much that throughput falls (not just levels
//! off), as a backend thrashing on locks, caches or a thread pool does. With `knee` 8 and
//! `base` 20 ms: 400 requests/s at 8 inside (its best), about 210/s at 64.

use std::time::Duration;

use super::gradient::{count_to_f64, f64_to_u64, u64_to_f64};

/// A backend whose best is `knee` requests in flight, each taking `base`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Knee {
    /// The concurrency it serves best at (≥ 1).
    pub knee: usize,
    /// The latency of one request up to the knee.
    pub base: Duration,
}

impl Knee {
    /// How much slower each request gets per request past the knee, as a share of the
    /// knee's throughput: 0.13 / knee (so 64 inside an 8-knee backend gets 52 % of its best).
    fn slowdown(&self) -> f64 {
        0.13 / count_to_f64(self.knee.max(1))
    }

    /// The latency of a request that finds `in_flight` requests inside (itself included).
    pub fn latency(&self, in_flight: usize) -> Duration {
        let knee = self.knee.max(1);
        if in_flight <= knee {
            return self.base;
        }
        let n = count_to_f64(in_flight);
        let k = count_to_f64(knee);
        let factor = (n / k) * (1.0 + self.slowdown() * (n - k));
        let base_ns = u64_to_f64(u64::try_from(self.base.as_nanos()).unwrap_or(u64::MAX));
        Duration::from_nanos(f64_to_u64(base_ns * factor))
    }

    /// Requests per second it completes with `in_flight` inside all the time.
    pub fn throughput(&self, in_flight: usize) -> f64 {
        let latency = self.latency(in_flight.max(1)).as_secs_f64();
        if latency <= 0.0 {
            return 0.0;
        }
        count_to_f64(in_flight.max(1)) / latency
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_knee_is_the_best_and_64_inside_gets_about_210_per_second() {
        let backend = Knee {
            knee: 8,
            base: Duration::from_millis(20),
        };
        assert!((backend.throughput(8) - 400.0).abs() < 1e-6);
        assert!((backend.throughput(4) - 200.0).abs() < 1e-6);
        let at_64 = backend.throughput(64);
        assert!((205.0..215.0).contains(&at_64), "{at_64}");
        let best =
            (1..=128).max_by(|a, b| backend.throughput(*a).total_cmp(&backend.throughput(*b)));
        assert_eq!(best, Some(8));
    }
}
