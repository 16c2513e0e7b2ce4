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
mod meter;
mod sliding;
mod token_bucket;
mod warmup;
mod weighted_window;

pub use concurrency::{Concurrency, ConcurrencyState, LeaseEntry};
pub use fixed_window::{FixedWindow, FixedWindowState};
pub use gcra::{Gcra, GcraState};
pub use leaky_bucket::{LeakyBucket, LeakyBucketState};
pub use leaky_queue::{LeakyQueue, LeakyQueueState};
pub(crate) use meter::{interval_ns, Meter};
pub use sliding::{Sliding, SlidingState};
pub use token_bucket::{TokenBucket, TokenBucketState};
pub(crate) use warmup::Ramped;
pub use warmup::{Warm, WarmUp};
pub use weighted_window::{WeightedWindow, WeightedWindowState};
