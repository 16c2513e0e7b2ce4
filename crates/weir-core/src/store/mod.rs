//! Stores: where records live, and the promise each makes: [`step::apply`](crate::step::apply)
//! runs atomically per key. The embedded [`MemoryStore`] is the default; Redis and memcached
//! stores live in their own crates and must pass `weir-testkit`'s conformance suite.
//!
//! `contract.rs` is the [`Store`] trait, `scoped.rs` its key argument, `decisions.rs` the
//! answer to several limits, `memory/` the memory store.

mod contract;
mod decisions;
mod memory;
mod scoped;

pub use contract::Store;
pub use decisions::Decisions;
pub(crate) use memory::WordMeter;
pub use memory::{BlockedKey, BlockedKeys};
pub use memory::{ImportReport, SavedRecord, SnapshotError, StateSnapshot, MAX_SNAPSHOT_BYTES};
pub use memory::{MemoryStats, MemoryStore, MemoryStoreBuilder};
pub use scoped::{ScopedKey, ScopedLimits};
