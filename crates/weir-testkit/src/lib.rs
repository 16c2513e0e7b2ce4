//! # weir-testkit
//!
//! How Weir knows every store decides alike. Not published; used by the tests of every
//! store crate.
//!
//! - [`Model`]: the reference, a `HashMap` of records driven by the same pure
//!   [`weir_core::step::apply`] the stores must mirror.
//! - [`strategy`]: proptest strategies for rules and random operation sequences.
//! - [`invariants`]: what each algorithm promises, checked from the outside on a trace of
//!   decisions (never more than `L` in any window, `burst + rate·t`, exact `retry_after`,
//!   at most `N` live leases).
//! - [`conformance`]: one suite any [`Store`](weir_core::Store) must pass: it replays
//!   random sequences against the store and the model under a manual clock, compares every
//!   outcome, and checks the invariants on the store's own answers.
//! - [`faults`]: a memory store behind a fault switch, for the wrappers that guard stores.
//! - [`browser`]: headless Chromium and the scripts that drive it, for the dashboard's
//!   browser tests.
//! - [`per_core`]: the benchmark ceilings' one-runtime-per-core layout.
//! - [`slow_reader`]: a client that sends requests and never reads the answers, for the
//!   HTTP listeners' tests.
//! - [`servers`]: throwaway `redis-server` (single and Cluster) and `memcached` processes
//!   on free loopback ports, for the store crates' tests.

// A test kit states expectations by panicking, like a test does.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

pub mod browser;
pub mod conformance;
pub mod contention;
pub mod faults;
pub mod invariants;
mod model;
pub mod per_core;
pub mod ports;
pub mod sentinel;
pub mod servers;
pub mod slow_reader;
pub mod strategy;

pub use model::Model;

/// An epoch-based start time for simulations (2023-11-14T22:13:20Z), not aligned to any
/// window so that boundaries are exercised.
pub const T0_NS: u64 = 1_700_000_000_123_456_789;
