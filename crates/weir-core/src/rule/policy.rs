//! What a rule asks of a shared store: its [`FailurePolicy`] when the store cannot decide,
//! its [`Mode`] (exact, or leased slices), and one instance's [`Rule::share`] of it for the
//! local fallback. Set when the rule is built (`rule.rs`); read by `weir-resilience`'s
//! failover and leased stores, never by the pure step.

use crate::algorithm::Gcra;
use crate::error::RuleError;

use super::{Algorithm, Rule};

/// What a rule does when its store cannot decide (down, timed out, circuit open). Applied
/// by `weir_resilience::FailoverStore`; the memory store never fails this way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum FailurePolicy {
    /// Decide in-process with this instance's share of the limit (the limit divided by the
    /// configured instance count; see [`Rule::share`]). The default: limiting goes on.
    #[default]
    LocalFallback,
    /// Allow every request while the store is down (availability over protection).
    FailOpen,
    /// Deny every request while the store is down (protection over availability).
    FailClosed,
}

impl FailurePolicy {
    /// The policy's name in configuration (`on_failure:`): `local_fallback`, `fail_open`
    /// or `fail_closed`.
    ///
    /// ```
    /// assert_eq!(weir_core::FailurePolicy::FailClosed.name(), "fail_closed");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Self::LocalFallback => "local_fallback",
            Self::FailOpen => "fail_open",
            Self::FailClosed => "fail_closed",
        }
    }

    /// The policy for a request several rules limit together, when the store fails: fail
    /// closed if any rule fails closed (one rule that must not fail open keeps the request
    /// out), fail open only if every rule fails open, else the local fallback.
    ///
    /// ```
    /// use weir_core::FailurePolicy::{FailClosed, FailOpen, LocalFallback};
    /// use weir_core::FailurePolicy;
    /// assert_eq!(FailurePolicy::strictest([FailOpen, FailClosed, LocalFallback]), FailClosed);
    /// assert_eq!(FailurePolicy::strictest([FailOpen, LocalFallback]), LocalFallback);
    /// assert_eq!(FailurePolicy::strictest([FailOpen, FailOpen]), FailOpen);
    /// ```
    pub fn strictest(policies: impl IntoIterator<Item = FailurePolicy>) -> FailurePolicy {
        policies
            .into_iter()
            .fold(FailurePolicy::FailOpen, |strictest, p| {
                match (strictest, p) {
                    (FailurePolicy::FailClosed, _) | (_, FailurePolicy::FailClosed) => {
                        FailurePolicy::FailClosed
                    }
                    (FailurePolicy::LocalFallback, _) | (_, FailurePolicy::LocalFallback) => {
                        FailurePolicy::LocalFallback
                    }
                    _ => FailurePolicy::FailOpen,
                }
            })
    }
}

/// How a shared store decides a rule's checks: every check in the store (exact, the
/// default), or from slices of the limit each instance claims from the store and spends
/// locally (leased: `weir_resilience::LeasedStore` does it, with the bounds it states).
/// Only a store wrapped in a `LeasedStore` leases; any other store decides a leased rule
/// exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Every check is one atomic step in the store.
    #[default]
    Exact,
    /// Checks spend units of a slice claimed from the store ahead of time.
    Leased,
}

impl Mode {
    /// The mode's name in configuration (`exact`, `leased`).
    pub fn name(&self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Leased => "leased",
        }
    }
}

impl Rule {
    /// Opts the rule in to leased mode (see [`Mode::Leased`]): a
    /// `weir_resilience::LeasedStore` then claims slices of its limit from the shared store
    /// and decides locally until a slice runs out or expires. The mode changes no record:
    /// exact and leased instances of one rule share the same counts.
    ///
    /// Only algorithms whose units can be claimed ahead of time lease: GCRA, the token
    /// bucket, the leaky-bucket meter, the fixed window and the two window counters. Refused,
    /// with the reason, for the sliding log (its promise is "never more than the limit in
    /// any window", which a unit spent after it was claimed would break: use the sliding
    /// window counter), the leaky-bucket queue (each request's delay depends on the ones
    /// before it, everywhere), concurrency leases (each lease has a holder to release it),
    /// and any rule with a lockout (its first denial must reach the store to engage it).
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{Mode, Rule};
    /// let rule = Rule::gcra(100, Duration::from_secs(1), 100)?.leased()?;
    /// assert_eq!(rule.mode(), Mode::Leased);
    /// assert!(Rule::sliding_log(100, Duration::from_secs(1))?.leased().is_err());
    /// # Ok::<(), weir_core::RuleError>(())
    /// ```
    pub fn leased(mut self) -> Result<Self, RuleError> {
        let refused = match self.algorithm {
            Algorithm::SlidingLog(_) => Some(
                "the sliding log cannot be leased: it admits exactly the limit in every window, \
                 which a unit spent after it was claimed would break (use sliding_window)",
            ),
            Algorithm::LeakyQueue(_) => Some(
                "the leaky-bucket queue cannot be leased: each request's delay depends on \
                 every request before it",
            ),
            Algorithm::Concurrency(_) => {
                Some("concurrency leases cannot be leased: each one has a holder that releases it")
            }
            _ if self.lockout.is_some() => Some(
                "a rule with a lockout cannot be leased: its first denial must reach the store \
                 to engage the lockout",
            ),
            _ => None,
        };
        if let Some(reason) = refused {
            return Err(RuleError::Inconsistent {
                param: "mode",
                reason,
            });
        }
        self.mode = Mode::Leased;
        Ok(self)
    }

    /// How a shared store decides the rule: [`Mode::Leased`] only if it was opted in with
    /// [`leased`](Self::leased) and has no lockout (a lockout added afterwards turns leasing
    /// off), else [`Mode::Exact`].
    pub fn mode(&self) -> Mode {
        if self.lockout.is_some() {
            Mode::Exact
        } else {
            self.mode
        }
    }

    /// This instance's share of the rule when `instances` share it and each decides alone
    /// (local fallback): limits, capacities, bursts, depths and lease counts divided by
    /// `instances` (rounded down, at least 1), rates divided likewise (intervals
    /// multiplied). Windows, lockout and policy are unchanged. `instances <= 1` returns the
    /// rule itself.
    pub fn share(&self, instances: u64) -> Rule {
        if instances <= 1 {
            return *self;
        }
        let part = |n: u64| (n / instances).max(1);
        let slower = |interval_ns: u64| interval_ns.saturating_mul(instances);
        let mut rule = *self;
        match &mut rule.algorithm {
            Algorithm::FixedWindow(a) => a.limit = part(a.limit),
            Algorithm::SlidingLog(a) | Algorithm::SlidingWindow(a) => a.limit = part(a.limit),
            Algorithm::WeightedWindow(a) => a.limit = part(a.limit),
            Algorithm::TokenBucket(a) => {
                a.capacity = part(a.capacity);
                a.initial = part(a.initial).min(a.capacity);
                a.interval_ns = slower(a.interval_ns);
            }
            Algorithm::LeakyBucket(a) => {
                a.capacity = part(a.capacity);
                a.interval_ns = slower(a.interval_ns);
            }
            Algorithm::Gcra(a) => {
                *a = Gcra {
                    warmup: a.warmup,
                    ..Gcra::new(part(a.burst), slower(a.interval_ns))
                }
            }
            Algorithm::LeakyQueue(a) => {
                a.max_depth = part(a.max_depth);
                a.interval_ns = slower(a.interval_ns);
            }
            Algorithm::Concurrency(a) => a.max_leases = part(a.max_leases),
        }
        rule
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn an_instance_share_divides_limits_and_rates() {
        let rule = Rule::gcra(100, S, 40).unwrap();
        let share = rule.share(4);
        assert_eq!(share.limit(), 10);
        let Algorithm::Gcra(g) = share.algorithm() else {
            unreachable!()
        };
        assert_eq!(g.interval_ns(), 40_000_000, "25 per second");
        assert_eq!(Rule::concurrency(2).unwrap().share(8).limit(), 1);
        assert_eq!(rule.share(1), rule);
    }
}
