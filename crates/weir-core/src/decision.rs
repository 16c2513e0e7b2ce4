//! What every check returns: one [`Decision`] for every algorithm, and [`Usage`] for
//! `inspect`. A denial is a `Decision` with `allowed == false`, never an error.

use std::time::Duration;

/// The answer to one check, the same shape for every algorithm and store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// Whether the request may go (after `delay`, for the leaky-bucket queue).
    pub allowed: bool,
    /// The rule's limit: requests per window, bucket capacity, burst, queue depth or leases.
    pub limit: u64,
    /// How many more units a request could use right now (after this one, if it was allowed).
    pub remaining: u64,
    /// When the key is back to a fresh state if nothing else arrives (all usage expired or
    /// refilled, block over).
    pub reset_after: Duration,
    /// Zero when allowed. When denied: the earliest time after which the same request would
    /// be allowed, if nothing else happens in between (exact: denied just before, allowed at).
    /// For concurrency leases it is when the oldest lease expires; a release may come sooner.
    pub retry_after: Duration,
    /// For the leaky-bucket queue: how long to hold the request before sending it so the
    /// output leaves at a constant rate. Zero for every other algorithm.
    pub delay: Duration,
}

impl Decision {
    /// An allowed decision.
    pub(crate) fn allow(limit: u64, remaining: u64, reset_after: Duration) -> Self {
        Self {
            allowed: true,
            limit,
            remaining,
            reset_after,
            retry_after: Duration::ZERO,
            delay: Duration::ZERO,
        }
    }

    /// A denied decision.
    pub(crate) fn deny(
        limit: u64,
        remaining: u64,
        reset_after: Duration,
        retry_after: Duration,
    ) -> Self {
        Self {
            allowed: false,
            limit,
            remaining,
            reset_after,
            retry_after,
            delay: Duration::ZERO,
        }
    }
}

/// What `inspect` reports about a key, without changing it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Units in use now: hits in the window, tokens taken, bucket level, queued slots or
    /// live leases.
    pub used: u64,
    /// The rule's limit.
    pub limit: u64,
    /// `limit - used`, at least zero.
    pub remaining: u64,
    /// How long the key stays blocked (by hand or by a lockout); zero when it is not.
    pub blocked_for: Duration,
    /// How many lockouts this key has served and not yet been forgiven (escalation level).
    pub strikes: u32,
    /// When the key is back to fresh if nothing else arrives.
    pub reset_after: Duration,
}
