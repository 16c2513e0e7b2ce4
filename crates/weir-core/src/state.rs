//! What a store keeps per key: the algorithm's state plus an optional guard (block and
//! lockout strikes), and the instant from which the whole record is equivalent to fresh.
//! Stores hold [`Record`]s; only [`step::apply`](crate::step::apply) changes them.

use crate::algorithm::{
    ConcurrencyState, FixedWindowState, GcraState, LeakyBucketState, LeakyQueueState, Meter,
    Ramped, SlidingState, TokenBucketState, Warm, WeightedWindowState,
};
use crate::rule::{Algorithm, Rule};

/// One algorithm's state. Small states are inline; the variable-size ones are boxed so a
/// record stays 40 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum State {
    /// Fixed window.
    FixedWindow(FixedWindowState),
    /// Sliding log or sliding window counter.
    Sliding(Box<SlidingState>),
    /// Weighted two-window estimate.
    Weighted(Box<WeightedWindowState>),
    /// Token bucket.
    TokenBucket(TokenBucketState),
    /// Leaky bucket meter.
    LeakyBucket(LeakyBucketState),
    /// GCRA.
    Gcra(GcraState),
    /// Leaky bucket queue.
    LeakyQueue(LeakyQueueState),
    /// Concurrency leases.
    Concurrency(Box<ConcurrencyState>),
    /// GCRA with warm-up.
    GcraWarm(Warm<GcraState>),
    /// Token bucket with warm-up.
    TokenBucketWarm(Box<Warm<TokenBucketState>>),
}

impl State {
    /// The state of a key never seen under `algorithm`.
    pub fn fresh(algorithm: &Algorithm, now_ns: u64) -> Self {
        match algorithm {
            Algorithm::FixedWindow(a) => Self::FixedWindow(a.fresh(now_ns)),
            Algorithm::SlidingLog(a) | Algorithm::SlidingWindow(a) => {
                Self::Sliding(Box::new(a.fresh(now_ns)))
            }
            Algorithm::WeightedWindow(a) => Self::Weighted(Box::new(a.fresh(now_ns))),
            Algorithm::TokenBucket(a) => match a.warmed() {
                Some(w) => Self::TokenBucketWarm(Box::new(w.fresh(now_ns))),
                None => Self::TokenBucket(a.fresh(now_ns)),
            },
            Algorithm::LeakyBucket(a) => Self::LeakyBucket(a.fresh(now_ns)),
            Algorithm::Gcra(a) => match a.warmed() {
                Some(w) => Self::GcraWarm(w.fresh(now_ns)),
                None => Self::Gcra(a.fresh(now_ns)),
            },
            Algorithm::LeakyQueue(a) => Self::LeakyQueue(a.fresh(now_ns)),
            Algorithm::Concurrency(_) => Self::Concurrency(Box::default()),
        }
    }

    /// Whether this state belongs to `algorithm` (a rule change to another algorithm, or
    /// adding or removing warm-up, starts the key fresh; see `docs/design-decisions.md`, "Rule changes").
    pub fn belongs_to(&self, algorithm: &Algorithm) -> bool {
        match (algorithm, self) {
            (Algorithm::Gcra(a), Self::Gcra(_)) => return a.warmup.is_none(),
            (Algorithm::Gcra(a), Self::GcraWarm(_)) => return a.warmup.is_some(),
            (Algorithm::TokenBucket(a), Self::TokenBucket(_)) => return a.warmup.is_none(),
            (Algorithm::TokenBucket(a), Self::TokenBucketWarm(_)) => return a.warmup.is_some(),
            _ => {}
        }
        matches!(
            (algorithm, self),
            (Algorithm::FixedWindow(_), Self::FixedWindow(_))
                | (
                    Algorithm::SlidingLog(_) | Algorithm::SlidingWindow(_),
                    Self::Sliding(_)
                )
                | (Algorithm::WeightedWindow(_), Self::Weighted(_))
                | (Algorithm::LeakyBucket(_), Self::LeakyBucket(_))
                | (Algorithm::LeakyQueue(_), Self::LeakyQueue(_))
                | (Algorithm::Concurrency(_), Self::Concurrency(_))
        )
    }
}

/// A manual block and the lockout strikes of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Guard {
    /// Blocked until this instant (0: not blocked).
    pub blocked_until_ns: u64,
    /// Lockouts served and not yet forgiven.
    pub strikes: u32,
    /// When the strikes are forgotten.
    pub strikes_expire_ns: u64,
}

/// Everything a store keeps for one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// From this instant the record is equivalent to a fresh one and may be dropped (the
    /// Redis TTL, the memory store's sweep). Never earlier than a block or live strikes.
    pub expires_ns: u64,
    /// The algorithm's state.
    pub state: State,
    /// Block and lockout strikes, when there are any.
    pub guard: Option<Box<Guard>>,
}

impl Record {
    /// A fresh record for `rule`.
    pub fn fresh(rule: &Rule, now_ns: u64) -> Self {
        Self {
            expires_ns: 0,
            state: State::fresh(&rule.algorithm, now_ns),
            guard: None,
        }
    }

    /// Whether the key is limited, blocked or remembered in a way that dropping the record
    /// would forget (the memory store never evicts such a record).
    pub fn is_live(&self, now_ns: u64) -> bool {
        self.expires_ns > now_ns
    }

    /// Blocked until (0: not blocked).
    pub fn blocked_until_ns(&self) -> u64 {
        self.guard.as_ref().map_or(0, |g| g.blocked_until_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_stays_small() {
        assert!(std::mem::size_of::<Record>() <= 40);
    }
}
