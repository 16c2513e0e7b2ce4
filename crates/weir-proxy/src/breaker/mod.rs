//! Circuit breaking on the backend: one breaker per upstream, which opens on an error
//! ratio or a slow-call ratio over a sliding window and sends the upstream's calls to the
//! fallback (or answers `503` with `Retry-After`) until half-open probes find it well
//! again. `window.rs` (the counts), `machine.rs` (the pure state machine), `settings.rs`
//! (the knobs), `upstreams.rs` (one per upstream, its lock, clock and permits). Asked by
//! [`Forward`](crate::Forward) once the upstream is chosen; see `docs/circuit-breaking.md`.

mod divert;
mod machine;
mod settings;
mod upstreams;
mod window;

pub(crate) use divert::divert;
pub use settings::{BreakerError, BreakerSettings};
pub(crate) use upstreams::Breakers;
