//! The algorithms, each a pure step over a small state: `(state, now, cost) -> (decision,
//! next state)`. No clock reads, no I/O, no allocation on the common path. States encode
//! into a few integers so that Lua (Redis) and CAS loops (memcached) can run the same step;
//! `weir-testkit` checks every store against these functions.
//!
//! Every meter follows the same conventions:
//! - `cost == 0` is a peek: it reports whether a request of cost 1 would pass now and
//!   changes nothing.
//! - A cost above the rule's limit ([`Rule::limit`](crate::Rule::limit)) is rejected before this module is reached
//!   ([`CheckError::CostAboveCapacity`](crate::CheckError::CostAboveCapacity)).
//! - A denied check leaves the state unchanged.
//! - A `now` older than the state (another instance's clock lagging) never moves the state
//!   backwards and never mints capacity.
//! - `fresh_at_ns` is the instant from which the state is equivalent to a fresh one; a
//!   store may drop it from then on (that is the Redis TTL and the memory store's sweep).

mod concurrency;
mod fixed_window;
mod gcra;
mod leaky_bucket;
mod leaky_queue;
mod sliding;
mod token_bucket;
mod warmup;
mod weighted_window;

pub use concurrency::{Concurrency, ConcurrencyState, LeaseEntry};
pub use fixed_window::{FixedWindow, FixedWindowState};
pub use gcra::{Gcra, GcraState};
pub use leaky_bucket::{LeakyBucket, LeakyBucketState};
pub use leaky_queue::{LeakyQueue, LeakyQueueState};
pub use sliding::{Sliding, SlidingState};
pub use token_bucket::{TokenBucket, TokenBucketState};
pub(crate) use warmup::Ramped;
pub use warmup::{Warm, WarmUp};
pub use weighted_window::{WeightedWindow, WeightedWindowState};

use crate::decision::Decision;

/// The common shape of the counting algorithms (all but concurrency leases).
pub(crate) trait Meter {
    type State;

    /// The state of a key never seen before.
    fn fresh(&self, now_ns: u64) -> Self::State;
    /// Decides a request of `cost` (0 = peek) and, when allowed and `cost > 0`, consumes it.
    fn check(&self, state: &mut Self::State, now_ns: u64, cost: u64) -> Decision;
    /// Adds `n` units of usage (penalty), even beyond the limit.
    fn penalize(&self, state: &mut Self::State, now_ns: u64, n: u64);
    /// Gives `n` units of usage back (reward), never below zero usage.
    fn reward(&self, state: &mut Self::State, now_ns: u64, n: u64);
    /// Units in use at `now_ns`.
    fn used(&self, state: &Self::State, now_ns: u64) -> u64;
    /// From this instant on the state is equivalent to `fresh`.
    fn fresh_at_ns(&self, state: &Self::State) -> u64;
}

/// The rate `count per period` as the interval between two units, rounded up so that the
/// effective rate is never above the configured one (off by at most 1 ns per unit).
pub(crate) fn interval_ns(count: u64, period_ns: u64) -> u64 {
    crate::time::div_ceil(period_ns, count)
}
