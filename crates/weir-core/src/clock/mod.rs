//! Time sources: the [`Clock`] trait and its clocks. The only module in Weir that reads the
//! machine's clock.
//!
//! Every decision takes `now` as integer nanoseconds since the Unix epoch (`u64`, good until
//! the year 2554). Algorithms never read a clock: the [`Limiter`](crate::Limiter) asks a
//! [`Clock`] once per call and passes the number down, so tests and simulations drive time by
//! hand with [`ManualClock`].
//!
//! - `contract.rs`: the [`Clock`] trait and [`Sleep`].
//! - `system.rs`: [`SystemClock`], the production clock, and how it sleeps (tokio's timer
//!   inside a tokio runtime, `timer.rs`'s helper thread outside one, the thread itself when
//!   blocking).
//! - `timeline.rs`: the process's time line behind `SystemClock::now_ns`: the CPU's time
//!   stamp counter, re-anchored every millisecond to a monotonic clock anchored to the wall
//!   clock.
//! - `manual.rs`: [`ManualClock`], the clock tests move by hand.

mod contract;
mod manual;
mod system;
mod timeline;
mod timer;

pub use contract::{Clock, Sleep};
pub use manual::ManualClock;
pub use system::SystemClock;
