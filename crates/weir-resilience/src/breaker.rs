//! The circuit breaker of one part of a [`FailoverStore`](crate::FailoverStore)'s store (the
//! whole store, or one server of a memcached list): counts the part's consecutive failed
//! calls, asks for a confirmation at a threshold, opens only when the confirmation fails
//! too, and is closed again only by the PING probe. Lock-free: one atomic read on every
//! decision.
//!
//! Why a confirmation: on a loaded host many calls in flight time out together in one
//! slow moment, so a count of consecutive failures alone (however high) mistakes that
//! moment for an outage. The call that reaches the threshold PINGs the part (under the
//! timeout); only if the PING fails too does the circuit open. A slow moment that is over
//! by then resets the count and opens nothing.

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

/// What a failed call should do next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Nothing: below the threshold, or another call is confirming, or already open.
    Nothing,
    /// This call reached the threshold: PING the part, then report
    /// [`Breaker::confirmed`].
    Confirm,
}

#[derive(Debug, Default)]
pub(crate) struct Breaker {
    open: AtomicBool,
    consecutive_failures: AtomicU32,
    confirming: AtomicBool,
    /// Whether the PING probe of this part runs.
    pub(crate) probing: AtomicBool,
    /// Whether a call on this part has ever succeeded.
    answered: AtomicBool,
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

    /// Whether a call on this part has ever succeeded.
    pub(crate) fn has_answered(&self) -> bool {
        self.answered.load(Ordering::Relaxed)
    }

    pub(crate) fn record_success(&self) {
        if !self.answered.load(Ordering::Relaxed) {
            self.answered.store(true, Ordering::Relaxed);
        }
        if self.consecutive_failures.load(Ordering::Relaxed) != 0 {
            self.consecutive_failures.store(0, Ordering::Relaxed);
        }
    }

    /// Counts a failure; [`Next::Confirm`] for the one call that should PING the part.
    pub(crate) fn record_failure(&self, threshold: u32) -> Next {
        let failures = self
            .consecutive_failures
            .fetch_add(1, Ordering::AcqRel)
            .saturating_add(1);
        if failures < threshold.max(1) || self.open.load(Ordering::Acquire) {
            return Next::Nothing;
        }
        if self.confirming.swap(true, Ordering::AcqRel) {
            return Next::Nothing;
        }
        Next::Confirm
    }

    /// The confirmation's answer: `answered` false opens the circuit (true if this opened
    /// it); true starts the count again.
    pub(crate) fn confirmed(&self, answered: bool) -> bool {
        let opened = if answered {
            self.consecutive_failures.store(0, Ordering::Relaxed);
            false
        } else {
            self.open_circuit()
        };
        self.confirming.store(false, Ordering::Release);
        opened
    }

    /// Opens the circuit; true if it was closed.
    fn open_circuit(&self) -> bool {
        let opened = !self.open.swap(true, Ordering::AcqRel);
        if opened {
            self.mode_changes.fetch_add(1, Ordering::Relaxed);
        }
        opened
    }

    /// Closes the circuit (the probe saw the part answer); true if it was open.
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
    fn opens_only_when_the_confirmation_fails_too() {
        let b = Breaker::default();
        assert_eq!(b.record_failure(3), Next::Nothing);
        b.record_success();
        assert_eq!(b.record_failure(3), Next::Nothing);
        assert_eq!(b.record_failure(3), Next::Nothing);
        assert_eq!(b.mode(), Mode::Store);
        assert_eq!(b.record_failure(3), Next::Confirm, "the third asks");
        assert_eq!(
            b.record_failure(3),
            Next::Nothing,
            "one confirmation at once"
        );
        assert!(!b.confirmed(true), "the part answered: a slow moment");
        assert_eq!(b.mode(), Mode::Store);
        assert_eq!(
            b.record_failure(3),
            Next::Nothing,
            "the count started again"
        );
        assert_eq!(b.record_failure(3), Next::Nothing);
        assert_eq!(b.record_failure(3), Next::Confirm);
        assert!(b.confirmed(false), "no answer: open");
        assert_eq!(b.mode(), Mode::Fallback);
        assert_eq!(b.record_failure(3), Next::Nothing, "already open");
        assert!(b.close());
        assert_eq!(b.mode(), Mode::Store);
        assert_eq!(b.mode_changes(), 2);
    }
}
