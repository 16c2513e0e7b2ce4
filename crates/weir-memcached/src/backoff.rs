//! Jittered exponential backoff between compare-and-swap attempts, so contenders on one key
//! spread out instead of colliding again in lockstep. Reads no clock: the jitter comes from
//! a per-store generator seeded by the standard library's random hasher keys.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The first wait is up to this long; each attempt doubles it.
const BASE_US: u64 = 20;
/// No single wait is longer than this.
const MAX_US: u64 = 2_000;

/// A source of jittered waits.
#[derive(Debug)]
pub(crate) struct Backoff {
    state: AtomicU64,
}

impl Backoff {
    /// A generator with a random seed.
    pub(crate) fn new() -> Self {
        Self {
            state: AtomicU64::new(RandomState::new().hash_one(0x5745_4952u64)),
        }
    }

    /// The next pseudo-random number (splitmix64).
    fn next(&self) -> u64 {
        let mut z = self
            .state
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// How long to wait before attempt `attempt + 1`: uniform in `[0, min(MAX, BASE·2^attempt)]`.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let cap_us = BASE_US.saturating_mul(1 << attempt.min(10)).min(MAX_US);
        Duration::from_micros(self.next() % (cap_us + 1))
    }

    /// Waits before the next attempt.
    pub(crate) async fn wait(&self, attempt: u32) {
        tokio::time::sleep(self.delay(attempt)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_but_stay_capped() {
        let b = Backoff::new();
        for attempt in 0..40 {
            let cap = BASE_US.saturating_mul(1 << attempt.min(10)).min(MAX_US);
            assert!(b.delay(attempt) <= Duration::from_micros(cap));
        }
        let distinct: std::collections::HashSet<_> = (0..32).map(|_| b.delay(10)).collect();
        assert!(distinct.len() > 16, "jittered");
    }
}
