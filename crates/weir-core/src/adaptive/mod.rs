//! Adaptive concurrency limits: how many requests a backend should have inside at once,
//! found by measuring its latency instead of written down by hand. Pure: a state machine
//! fed samples (round-trip time, requests in flight at the start, dropped or not) and the
//! time they ended; no clock reads, no I/O. The gate that enforces the limit lives with
//! the callers (`weir-tower`'s in-flight limit, which `weir proxy --max-in-flight auto`
//! runs); `weir simulate` and the tests drive the same machine against a modelled backend
//! ([`Knee`], [`simulate`]).
//!
//! The algorithm is Envoy's adaptive-concurrency gradient controller (see
//! [`GradientLimit`] and `docs/adaptive-concurrency.md` for why it and not Netflix's
//! Gradient2 or Vegas).

mod gradient;
mod knee;
mod settings;
mod simulation;

pub use gradient::{AdaptiveStats, GradientLimit, Sample};
pub use knee::Knee;
pub use settings::{AdaptiveError, AdaptiveSettings};
pub use simulation::{simulate, Gate, Phase, Run, Second};
