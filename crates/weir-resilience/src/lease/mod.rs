//! [`LeasedStore`]: decides [leased](weir_core::Mode::Leased) rules from slices of their
//! limit claimed from the shared store, so most checks never leave the process. Sits in
//! front of the rest of the stack (`LeasedStore ─▶ OverLimitCache ─▶ FailoverStore ─▶
//! RedisStore`); exact rules and every other operation pass straight through.
//!
//! The protocol and its bounds are on [`LeasedStore`].

mod claim;
mod config;
mod share;
mod slice;
mod store;

pub use config::LeaseConfig;
pub use store::{LeaseStats, LeasedStore};
