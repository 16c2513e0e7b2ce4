//! The waits between attempts to reach the xDS management server: after a failed
//! connection, `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL` ±50 % (ratelimit's linear
//! retry with jitter 0.5); after a stream that broke, [`Backoff`]: from
//! `XDS_CLIENT_BACKOFF_INITIAL_INTERVAL`, doubling per failure in a row up to
//! `XDS_CLIENT_BACKOFF_MAX_INTERVAL`, spread by ±`XDS_CLIENT_BACKOFF_RANDOM_FACTOR` when
//! `XDS_CLIENT_BACKOFF_JITTER` is on, never above the maximum. Pure: the random draw is an
//! argument ([`draw`] makes one), so the bounds are tested exactly.

use std::hash::{BuildHasher as _, Hasher as _};
use std::time::Duration;

/// Exponential backoff with jitter, bounded by `max`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Backoff {
    /// The first wait.
    pub(crate) initial: Duration,
    /// The longest wait.
    pub(crate) max: Duration,
    /// The spread of the jitter, from 0 to 1.
    pub(crate) random_factor: f64,
    /// Whether to spread the waits at all.
    pub(crate) jitter: bool,
}

impl Backoff {
    /// The wait before attempt `failures + 1`, with `random` in [0, 1).
    pub(crate) fn delay(&self, failures: u32, random: f64) -> Duration {
        let base = self
            .initial
            .saturating_mul(2u32.saturating_pow(failures.min(30)))
            .min(self.max);
        let spread = if self.jitter { self.random_factor } else { 0.0 };
        spread_by(base, spread, random).min(self.max)
    }
}

/// The connection retry's wait: `interval` ±50 %.
pub(crate) fn connect_delay(interval: Duration, random: f64) -> Duration {
    spread_by(interval, 0.5, random)
}

/// `base` times a factor from `1 - spread` to `1 + spread`, chosen by `random`.
fn spread_by(base: Duration, spread: f64, random: f64) -> Duration {
    let factor = 1.0 - spread + 2.0 * spread * random.clamp(0.0, 1.0);
    base.mul_f64(factor.max(0.0))
}

/// A random number in [0, 1): std's per-instance random hash keys, no extra dependency.
pub(crate) fn draw() -> f64 {
    let bits = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    // The top 53 bits as a fraction of 2^53: exact in an f64.
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn backoff(jitter: bool) -> Backoff {
        Backoff {
            initial: S * 10,
            max: S * 60,
            random_factor: 0.5,
            jitter,
        }
    }

    #[test]
    fn the_wait_doubles_up_to_the_maximum_and_never_passes_it() {
        let b = backoff(false);
        let waits: Vec<_> = (0..5).map(|n| b.delay(n, 0.9)).collect();
        assert_eq!(waits, [S * 10, S * 20, S * 40, S * 60, S * 60]);
        assert_eq!(b.delay(u32::MAX, 0.0), S * 60);
    }

    #[test]
    fn jitter_spreads_the_wait_by_the_random_factor_within_the_maximum() {
        let b = backoff(true);
        assert_eq!(b.delay(0, 0.0), S * 5);
        assert_eq!(b.delay(0, 0.5), S * 10);
        assert_eq!(b.delay(0, 1.0), S * 15);
        assert_eq!(
            b.delay(3, 1.0),
            S * 60,
            "the maximum bounds the jittered wait"
        );
        assert_eq!(connect_delay(S * 2, 0.0), S);
        assert_eq!(connect_delay(S * 2, 1.0), S * 3);
    }

    #[test]
    fn draws_fall_in_zero_to_one_and_differ() {
        let draws: Vec<f64> = (0..64).map(|_| draw()).collect();
        assert!(draws.iter().all(|d| (0.0..1.0).contains(d)));
        assert!(draws.windows(2).any(|w| w[0] != w[1]));
    }
}
