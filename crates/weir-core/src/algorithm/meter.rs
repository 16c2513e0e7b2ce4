//! The shape every counting algorithm shares ([`Meter`]: fresh, check, penalize, reward,
//! used, fresh-at) and the one rate conversion they all use ([`interval_ns`]). The pure
//! step (`step.rs`) dispatches a rule's operation to its algorithm through this trait;
//! concurrency leases, which hold holders rather than a count, do not implement it.

use crate::decision::Decision;

/// The common shape of the counting algorithms (all but concurrency leases).
pub(crate) trait Meter {
    type State;

    /// The state of a key never seen before.
    fn fresh(&self, now_ns: u64) -> Self::State;
    /// Decides a request of `cost` (0 = peek) and, when allowed and `cost > 0`, consumes it.
    fn check(&self, state: &mut Self::State, now_ns: u64, cost: u64) -> Decision;
    /// Adds `n` units of usage (penalty), even beyond the limit.
    fn penalize(&self, state: &mut Self::State, now_ns: u64, n: u64);
    /// Gives `n` units of usage back (reward), never below zero usage.
    fn reward(&self, state: &mut Self::State, now_ns: u64, n: u64);
    /// Units in use at `now_ns`.
    fn used(&self, state: &Self::State, now_ns: u64) -> u64;
    /// From this instant on the state is equivalent to `fresh`.
    fn fresh_at_ns(&self, state: &Self::State) -> u64;
}

/// The rate `count per period` as the interval between two units, rounded up so that the
/// effective rate is never above the configured one (off by at most 1 ns per unit).
pub(crate) fn interval_ns(count: u64, period_ns: u64) -> u64 {
    crate::time::div_ceil(period_ns, count)
}
