//! What a rule says about time, read off a decision without asking the store: the window
//! a `RateLimit-Policy` header names, and how long a check that just used up the limit
//! stays denied (the over-limit cache in `weir-resilience` answers with it). Pure.

use std::time::Duration;

use crate::decision::Decision;
use crate::time::duration_ns;

use super::{Algorithm, Rule};

impl Rule {
    /// The time over which [`limit`](Self::limit) applies: the window of the window
    /// algorithms, and the time to go from empty to full (`limit × interval`) for the
    /// buckets, GCRA and the queue. Zero for concurrency leases, which have no window. This
    /// is the `w` of an IETF `RateLimit-Policy` header.
    pub fn window(&self) -> Duration {
        let ns = match &self.algorithm {
            Algorithm::FixedWindow(a) => a.window_ns,
            Algorithm::SlidingLog(a) | Algorithm::SlidingWindow(a) => a.window_ns,
            Algorithm::WeightedWindow(a) => a.window_ns,
            Algorithm::TokenBucket(a) => a.capacity.saturating_mul(a.interval_ns),
            Algorithm::LeakyBucket(a) => a.capacity.saturating_mul(a.interval_ns),
            Algorithm::Gcra(a) => a.tolerance_ns,
            Algorithm::LeakyQueue(a) => a.max_depth.saturating_mul(a.interval_ns),
            Algorithm::Concurrency(_) => 0,
        };
        Duration::from_nanos(ns)
    }

    /// Right after `allowed`, a check of `cost` under this rule that left fewer than `cost`
    /// units (`remaining < cost`): how long the same check stays denied if nothing else
    /// happens to the key. This is the `retry_after` that check would get, read off the
    /// allowed decision alone, so a caller can answer it without asking the store (the
    /// over-limit cache in `weir-resilience` does).
    ///
    /// Exact for the fixed window (until the window ends), and for GCRA, the token bucket
    /// and the leaky-bucket meter (`reset_after − (limit − cost) × interval`: the time until
    /// `cost` units are back). If the decision came from a share of this rule
    /// ([`share`](Self::share): a longer interval, a smaller limit), it is a lower bound,
    /// never later than the truth. `None` when the decision does not tell: it allowed with
    /// `cost` or more to spare, the cost is zero, or the algorithm's next free unit is not
    /// in it (the sliding log and window counters, the queue, leases).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use weir_core::{Key, MemoryStore, Op, Outcome, Rule};
    /// let rule = Rule::gcra(10, Duration::from_secs(1), 2)?; // one per 100 ms, burst 2
    /// let store = MemoryStore::default();
    /// let key = Key::new("k")?;
    /// let check = |now| match store.apply_now(&key, &rule, Op::Check { cost: 1 }, now) {
    ///     Ok(Outcome::Decision(d)) => d,
    ///     other => panic!("{other:?}"),
    /// };
    /// check(0);
    /// let last = check(0); // the burst is spent
    /// let wait = rule.retry_after_allowed(&last, 1).unwrap();
    /// assert_eq!(wait, Duration::from_millis(100));
    /// assert_eq!(check(0).retry_after, wait);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry_after_allowed(&self, allowed: &Decision, cost: u64) -> Option<Duration> {
        if !allowed.allowed || cost == 0 || allowed.remaining >= cost {
            return None;
        }
        let reset_ns = duration_ns(allowed.reset_after);
        let back_ns = |limit: u64, interval_ns: u64| {
            let spare = limit.saturating_sub(cost).saturating_mul(interval_ns);
            reset_ns.saturating_sub(spare)
        };
        let wait_ns = match &self.algorithm {
            Algorithm::FixedWindow(_) => reset_ns,
            Algorithm::Gcra(a) => back_ns(a.burst, a.interval_ns),
            Algorithm::TokenBucket(a) => back_ns(a.capacity, a.interval_ns),
            Algorithm::LeakyBucket(a) => back_ns(a.capacity, a.interval_ns),
            Algorithm::SlidingLog(_)
            | Algorithm::SlidingWindow(_)
            | Algorithm::WeightedWindow(_)
            | Algorithm::LeakyQueue(_)
            | Algorithm::Concurrency(_) => return None,
        };
        (wait_ns > 0).then(|| Duration::from_nanos(wait_ns))
    }
}
