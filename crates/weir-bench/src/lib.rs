//! What Weir's load generators share (not published): the rule each drives, named on the
//! command line by its algorithm, and the cheap random draw that picks a key per check.
//! The generators themselves are the binaries: `lease-load` (`src/bin/lease_load.rs`,
//! exact or leased decisions through weir-resilience's `LeasedStore`) and `store-load`
//! (`src/bin/store_load.rs`, a `Limiter` on the Redis or memcached store, optionally behind
//! the over-limit cache). Neither is on a decision's path; they measure it from outside.

use std::time::Duration;

use clap::ValueEnum;
use weir_core::{Rule, RuleError};

/// The algorithm of the rule a load generator drives (`--algorithm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
#[value(rename_all = "snake_case")]
pub enum Algorithm {
    /// GCRA with burst = limit
    Gcra,
    /// A token bucket of capacity = rate = limit per window
    TokenBucket,
    /// A fixed window of limit per window
    FixedWindow,
    /// A sliding window of limit per window, in tenths of the window
    SlidingWindow,
    /// A sliding log of limit per window
    SlidingLog,
}

impl Algorithm {
    /// The name `--algorithm` takes, as the JSON lines print it.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::Gcra => "gcra",
            Self::TokenBucket => "token_bucket",
            Self::FixedWindow => "fixed_window",
            Self::SlidingWindow => "sliding_window",
            Self::SlidingLog => "sliding_log",
        }
    }

    /// The rule allowing `limit` per `window` under this algorithm.
    ///
    /// # Errors
    /// What the rule's constructor refuses (a zero limit or window).
    pub fn rule(self, limit: u64, window: Duration) -> Result<Rule, RuleError> {
        match self {
            Self::Gcra => Rule::gcra(limit, window, limit),
            Self::TokenBucket => Rule::token_bucket(limit, limit, window),
            Self::FixedWindow => Rule::fixed_window(limit, window),
            Self::SlidingWindow => Rule::sliding_window(limit, window, window / 10),
            Self::SlidingLog => Rule::sliding_log(limit, window),
        }
    }
}

/// A xorshift64 generator: one key index per check, cheap enough not to show in a
/// measurement. Not for anything but spreading load.
#[derive(Debug, Clone, Copy)]
pub struct Xorshift(u64);

impl Xorshift {
    /// Starts from `seed` (zero is moved off zero, where xorshift would stay).
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed | u64::from(seed == 0))
    }

    /// The next draw, below `n` (`n` of zero is taken as one).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}
