//! The circuit breaker of a [`FailoverStore`](crate::FailoverStore): counts consecutive
//! store failures, opens after a threshold, and is closed again only by the PING probe.
//! Lock-free: two atomics read on every decision.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

/// Where decisions are made right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The shared store decides (circuit closed).
    Store,
    /// The store is considered down; each rule's failure policy decides (circuit open).
    Fallback,
}

impl Mode {
    /// `"store"` or `"fallback"`, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Store => "store",
            Mode::Fallback => "fallback",
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Breaker {
    open: AtomicBool,
    consecutive_failures: AtomicU32,
    mode_changes: AtomicU64,
}

impl Breaker {
    pub(crate) fn mode(&self) -> Mode {
        if self.open.load(Ordering::Acquire) {
            Mode::Fallback
        } else {
            Mode::Store
        }
    }

    pub(crate) fn record_success(&self) {
        if self.consecutive_failures.load(Ordering::Relaxed) != 0 {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        }
    }

    /// Counts a failure; returns true if this one opened the circuit.
    pub(crate) fn record_failure(&self, threshold: u32) -> bool {
        let failures = self
            .consecutive_failures
            .fetch_add(1, Ordering::AcqRel)
            .saturating_add(1);
        failures >= threshold.max(1) && self.open_circuit()
    }

    /// Opens the circuit; true if it was closed.
    fn open_circuit(&self) -> bool {
        let opened = !self.open.swap(true, Ordering::AcqRel);
        if opened {
            self.mode_changes.fetch_add(1, Ordering::Relaxed);
        }
        opened
    }

    /// Closes the circuit (the probe saw the store answer); true if it was open.
    pub(crate) fn close(&self) -> bool {
        self.consecutive_failures.store(0, Ordering::Relaxed);
        let closed = self.open.swap(false, Ordering::AcqRel);
        if closed {
            self.mode_changes.fetch_add(1, Ordering::Relaxed);
        }
        closed
    }

    pub(crate) fn mode_changes(&self) -> u64 {
        self.mode_changes.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_the_threshold_and_closes_on_demand() {
        let b = Breaker::default();
        assert!(!b.record_failure(3));
        b.record_success();
        assert!(!b.record_failure(3));
        assert!(!b.record_failure(3));
        assert_eq!(b.mode(), Mode::Store);
        assert!(
            b.record_failure(3),
            "the third consecutive failure opens it"
        );
        assert!(!b.record_failure(3), "already open");
        assert_eq!(b.mode(), Mode::Fallback);
        assert!(b.close());
        assert_eq!(b.mode(), Mode::Store);
        assert_eq!(b.mode_changes(), 2);
    }
}
