//! The rule a load generator drives, named on its command line by algorithm
//! (`--algorithm gcra`), with one limit and window for all. Not on a decision's path.

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
