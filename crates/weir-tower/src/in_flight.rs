//! The in-flight limit towards the inner service (a weak backend's concurrency): at most N
//! requests inside at once; a request that finds all N busy waits in a bounded queue for up
//! to a max wait, then is refused (`503`). Runs after the rate limits allowed a request,
//! just before the inner service is called; the permit is held until the response head is
//! back.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use weir_core::Clock;

/// Settings of the in-flight limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InFlightLimit {
    /// At most this many requests inside the inner service at once (≥ 1).
    pub max_in_flight: usize,
    /// At most this many waiting for a slot; more are refused at once.
    pub max_queued: usize,
    /// The longest a request waits for a slot.
    pub max_wait: Duration,
}

/// The shared state of the limit: one per layer, shared by every clone of its service.
#[derive(Debug)]
pub(crate) struct InFlight {
    settings: InFlightLimit,
    slots: Arc<Semaphore>,
    queued: AtomicUsize,
}

/// Decrements the queued count when a waiter leaves, however it leaves.
struct Queued<'a>(&'a AtomicUsize);

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl InFlight {
    pub(crate) fn new(settings: InFlightLimit) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(settings.max_in_flight.max(1))),
            settings,
            queued: AtomicUsize::new(0),
        }
    }

    /// A slot, or `None` when the queue is full or the wait ran out.
    pub(crate) async fn acquire(&self, clock: &dyn Clock) -> Option<OwnedSemaphorePermit> {
        if let Ok(permit) = Arc::clone(&self.slots).try_acquire_owned() {
            return Some(permit);
        }
        let before = self.queued.fetch_add(1, Ordering::AcqRel);
        let _queued = Queued(&self.queued);
        if before >= self.settings.max_queued {
            return None;
        }
        let deadline_ns = clock
            .now_ns()
            .saturating_add(u64::try_from(self.settings.max_wait.as_nanos()).unwrap_or(u64::MAX));
        tokio::select! {
            permit = Arc::clone(&self.slots).acquire_owned() => permit.ok(),
            () = clock.sleep_until(deadline_ns) => None,
        }
    }

    pub(crate) fn settings(&self) -> InFlightLimit {
        self.settings
    }

    /// Requests inside now.
    pub(crate) fn in_flight(&self) -> usize {
        self.settings
            .max_in_flight
            .saturating_sub(self.slots.available_permits())
    }
}
