//! Which shard of a structure sharded by thread this thread writes: the top-denied sketches
//! (`heavy_hitters.rs`) and the latency histograms (`metrics/histogram.rs`), both written
//! on every denial or request by every worker, and `weir proxy`'s idle upstream
//! connections (each thread reuses those it dialled). The first threads to write each take the
//! next index, so a runtime's few workers write shards of their own and no cache line of
//! these moves between their cores on the decision path; readers (a scrape, the admin
//! API) add the shards up.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most shards a structure has.
pub const SHARDS_MAX: usize = 32;

/// The next index a thread that writes for the first time takes.
static NEXT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's index, taken at its first write.
    static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
}

/// How many shards a structure sharded by thread has: twice the cores (a runtime's workers
/// and a few other writers), at least 4, at most [`SHARDS_MAX`].
pub fn shard_count() -> usize {
    let cores = std::thread::available_parallelism().map_or(1, NonZeroUsize::get);
    cores.saturating_mul(2).clamp(4, SHARDS_MAX)
}

/// This thread's shard among `shards` (0 when `shards` is 0).
pub fn this_thread(shards: usize) -> usize {
    INDEX.with(|index| *index) % shards.max(1)
}
