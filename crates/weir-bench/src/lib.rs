//! What Weir's load generators share (not published): the rule each drives, named on the
//! command line by its algorithm, and the cheap random draw that picks a key per check.
//! The generators themselves are the binaries: `lease-load` (`src/bin/lease_load.rs`,
//! exact or leased decisions through weir-resilience's `LeasedStore`) and `store-load`
//! (`src/bin/store_load.rs`, a `Limiter` on the Redis or memcached store, optionally behind
//! the over-limit cache). Neither is on a decision's path; they measure it from outside.
//!
//! `algorithm.rs` is the rule by name, `xorshift.rs` the draw.

mod algorithm;
mod xorshift;

pub use algorithm::Algorithm;
pub use xorshift::Xorshift;
