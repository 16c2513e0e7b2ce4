//! Rules: an algorithm with validated parameters, plus an optional lockout. Built once (from
//! code or, later, from YAML) and checked when built, so a bad parameter is a typed error that
//! names it, never a surprise at check time.
//!
//! This file is the rule and its constructors; `rule/lockout.rs` the lockout,
//! `rule/policy.rs` what a shared store does with the rule (failure policy, leased mode,
//! an instance's share), and `rule/timing.rs` what a decision's headers read off it.

mod lockout;
mod policy;
mod timing;

pub use lockout::Lockout;
pub use policy::{FailurePolicy, Mode};

use crate::scope::{stable_hash, Scope};
use std::time::Duration;

use crate::algorithm::{
    interval_ns, Concurrency, FixedWindow, Gcra, LeakyBucket, LeakyQueue, Sliding, TokenBucket,
    WarmUp, WeightedWindow,
};
use crate::error::RuleError;
use crate::time::duration_ns;

/// The algorithm of a rule, with its validated parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// Fixed window aligned to the epoch.
    FixedWindow(FixedWindow),
    /// Exact sliding window log.
    SlidingLog(Sliding),
    /// Sliding window counter with a precision.
    SlidingWindow(Sliding),
    /// Two-window weighted sliding estimate.
    WeightedWindow(WeightedWindow),
    /// Token bucket.
    TokenBucket(TokenBucket),
    /// Leaky bucket as a meter.
    LeakyBucket(LeakyBucket),
    /// GCRA.
    Gcra(Gcra),
    /// Leaky bucket as a queue (shaping).
    LeakyQueue(LeakyQueue),
    /// Concurrency leases.
    Concurrency(Concurrency),
}

impl Algorithm {
    /// The algorithm's name as used in configuration and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Self::FixedWindow(_) => "fixed_window",
            Self::SlidingLog(_) => "sliding_log",
            Self::SlidingWindow(_) => "sliding_window",
            Self::WeightedWindow(_) => "weighted_window",
            Self::TokenBucket(_) => "token_bucket",
            Self::LeakyBucket(_) => "leaky_bucket",
            Self::Gcra(_) => "gcra",
            Self::LeakyQueue(_) => "leaky_queue",
            Self::Concurrency(_) => "concurrency",
        }
    }

    /// Whether the algorithm never admits more than its limit in a window of its length
    /// (the sliding log), or more than `burst + rate·t` over `t` (the buckets and GCRA).
    /// False for the fixed window (boundary burst) and the approximations.
    pub fn is_exact(&self) -> bool {
        matches!(
            self,
            Self::SlidingLog(_)
                | Self::TokenBucket(_)
                | Self::LeakyBucket(_)
                | Self::Gcra(_)
                | Self::LeakyQueue(_)
                | Self::Concurrency(_)
        )
    }
}

/// A validated rule: an algorithm and its policies. Cheap to copy.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Rule, RuleError};
///
/// let api = Rule::gcra(10, Duration::from_secs(1), 10)?;
/// assert_eq!(api.limit(), 10);
/// assert_eq!(
///     Rule::fixed_window(0, Duration::from_secs(1)).unwrap_err().to_string(),
///     "limit must be greater than zero"
/// );
/// # Ok::<(), RuleError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Rule {
    pub(crate) algorithm: Algorithm,
    pub(crate) lockout: Option<Lockout>,
    pub(crate) on_failure: FailurePolicy,
    pub(crate) scope: Scope,
    pub(crate) mode: Mode,
}

/// The longest window, period or lockout a rule accepts: ten years. Longer spans are
/// almost certainly a unit mistake, and keeping them bounded keeps every sum of instants
/// far from `u64::MAX`.
pub const MAX_SPAN: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A span in ns: positive and at most [`MAX_SPAN`].
fn span(param: &'static str, d: Duration) -> Result<u64, RuleError> {
    let ns = positive(param, duration_ns(d))?;
    at_most(param, ns, duration_ns(MAX_SPAN))
}

fn positive(param: &'static str, value: u64) -> Result<u64, RuleError> {
    if value == 0 {
        Err(RuleError::Zero { param })
    } else {
        Ok(value)
    }
}

fn at_most(param: &'static str, value: u64, max: u64) -> Result<u64, RuleError> {
    if value > max {
        Err(RuleError::TooLarge { param, value, max })
    } else {
        Ok(value)
    }
}

/// `count` per `per` as an interval, checking both and that the interval is at least 1 ns.
fn rate_interval(count: u64, per: Duration) -> Result<u64, RuleError> {
    let count = positive("rate", count)?;
    let per_ns = span("period", per)?;
    at_most("rate", count, per_ns)?;
    Ok(interval_ns(count, per_ns))
}

impl Rule {
    fn new(algorithm: Algorithm) -> Self {
        Self {
            algorithm,
            lockout: None,
            on_failure: FailurePolicy::LocalFallback,
            scope: Scope::Parameters(0),
            mode: Mode::Exact,
        }
        .rescoped()
    }

    /// Recomputes an unnamed rule's scope after its parameters changed (a copy made by
    /// [`share`](Self::share) keeps its rule's scope: it stands for the same rule).
    fn rescoped(mut self) -> Self {
        if let Scope::Parameters(_) = self.scope {
            self.scope =
                Scope::Parameters(stable_hash("weir-rule", &(self.algorithm, self.lockout)));
        }
        self
    }

    /// At most `limit` per fixed `window`, windows aligned to the Unix epoch.
    pub fn fixed_window(limit: u64, window: Duration) -> Result<Self, RuleError> {
        Ok(Self::new(Algorithm::FixedWindow(FixedWindow {
            limit: positive("limit", limit)?,
            window_ns: span("window", window)?,
        })))
    }

    /// At most `limit` in any window of length `window`, exactly (one timestamp per admitted
    /// request; `limit` at most [`Sliding::MAX_LOG_LIMIT`]).
    pub fn sliding_log(limit: u64, window: Duration) -> Result<Self, RuleError> {
        let limit = at_most("limit", positive("limit", limit)?, Sliding::MAX_LOG_LIMIT)?;
        Ok(Self::new(Algorithm::SlidingLog(Sliding {
            limit,
            window_ns: span("window", window)?,
            precision_ns: 1,
        })))
    }

    /// At most `limit` per sliding `window`, counted in buckets of `precision` (which must
    /// divide the window; at most [`Sliding::MAX_BUCKETS`] buckets).
    pub fn sliding_window(
        limit: u64,
        window: Duration,
        precision: Duration,
    ) -> Result<Self, RuleError> {
        let limit = positive("limit", limit)?;
        let window_ns = span("window", window)?;
        let precision_ns = span("precision", precision)?;
        if window_ns % precision_ns != 0 {
            return Err(RuleError::PrecisionDoesNotDivideWindow {
                precision_ns,
                window_ns,
            });
        }
        at_most(
            "window / precision",
            window_ns / precision_ns,
            Sliding::MAX_BUCKETS,
        )?;
        Ok(Self::new(Algorithm::SlidingWindow(Sliding {
            limit,
            window_ns,
            precision_ns,
        })))
    }

    /// At most `limit` per sliding `window`, estimated from two fixed windows (error bound in
    /// [`WeightedWindow`]).
    pub fn weighted_window(limit: u64, window: Duration) -> Result<Self, RuleError> {
        Ok(Self::new(Algorithm::WeightedWindow(WeightedWindow {
            limit: positive("limit", limit)?,
            window_ns: span("window", window)?,
        })))
    }

    /// A bucket of `capacity` tokens, refilled with `rate` tokens per `per`, starting full.
    pub fn token_bucket(capacity: u64, rate: u64, per: Duration) -> Result<Self, RuleError> {
        let capacity = positive("capacity", capacity)?;
        Ok(Self::new(Algorithm::TokenBucket(TokenBucket {
            capacity,
            interval_ns: rate_interval(rate, per)?,
            initial: capacity,
            warmup: None,
        })))
    }

    /// For a token bucket: a key starts with `initial` tokens instead of a full bucket.
    pub fn with_initial_tokens(mut self, initial: u64) -> Result<Self, RuleError> {
        let Algorithm::TokenBucket(tb) = &mut self.algorithm else {
            return Err(RuleError::Inconsistent {
                param: "initial_tokens",
                reason: "only a token bucket has initial tokens",
            });
        };
        tb.initial = at_most("initial_tokens", initial, tb.capacity)?;
        Ok(self.rescoped())
    }

    /// A leaky bucket meter of `capacity` that drains `rate` units per `per`.
    pub fn leaky_bucket(capacity: u64, rate: u64, per: Duration) -> Result<Self, RuleError> {
        Ok(Self::new(Algorithm::LeakyBucket(LeakyBucket {
            capacity: positive("capacity", capacity)?,
            interval_ns: rate_interval(rate, per)?,
        })))
    }

    /// GCRA: `rate` per `per` on average, with bursts of up to `burst`.
    pub fn gcra(rate: u64, per: Duration, burst: u64) -> Result<Self, RuleError> {
        let interval_ns = rate_interval(rate, per)?;
        Ok(Self::new(Algorithm::Gcra(Gcra::new(
            positive("burst", burst)?,
            interval_ns,
        ))))
    }

    /// `n` per second with a burst of `n`: the usual API limit, as GCRA.
    pub fn per_second(n: u64) -> Result<Self, RuleError> {
        Self::gcra(n, Duration::from_secs(1), n)
    }

    /// A leaky bucket queue: requests leave at `rate` per `per`; at most `max_depth` units
    /// wait, and none waits longer than `max_wait` (`Duration::MAX` for no time bound).
    pub fn leaky_queue(
        rate: u64,
        per: Duration,
        max_depth: u64,
        max_wait: Duration,
    ) -> Result<Self, RuleError> {
        Ok(Self::new(Algorithm::LeakyQueue(LeakyQueue {
            interval_ns: rate_interval(rate, per)?,
            max_depth: positive("max_depth", max_depth)?,
            // Anything beyond MAX_SPAN means "no time bound".
            max_wait_ns: if max_wait > MAX_SPAN {
                u64::MAX
            } else {
                duration_ns(max_wait)
            },
        })))
    }

    /// At most `max_leases` live leases per key (`1`: a timed exclusive lock).
    pub fn concurrency(max_leases: u64) -> Result<Self, RuleError> {
        Ok(Self::new(Algorithm::Concurrency(Concurrency {
            max_leases: positive("max_leases", max_leases)?,
        })))
    }

    /// Adds a warm-up: a cold key gets `rate / cold_factor`, and the rate ramps to the
    /// full rate as the key is used, over `period` at full use; a key idle (full) for
    /// `period` is cold again. The shape and the guarantee are [`WarmUp`]'s. `cold_factor`
    /// is 2 to [`WarmUp::MAX_COLD_FACTOR`] ([`WarmUp::DEFAULT_COLD_FACTOR`] is Guava's 3).
    ///
    /// Only the rate-based algorithms warm up: GCRA and the token bucket. Refused, with the
    /// reason, for the others: the windows and the sliding log count requests against a
    /// limit per window and have no rate to ramp; the leaky-bucket meter is GCRA's twin
    /// (use `gcra`); the queue's delays are promised to each request when it is admitted;
    /// concurrency leases have no rate. The algorithm is refused before the values are
    /// looked at, so any values give the reason.
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::Rule;
    /// let rule = Rule::gcra(100, Duration::from_secs(1), 100)?
    ///     .with_warmup(Duration::from_secs(30), 3)?;
    /// assert_eq!(rule.warmup().map(|w| w.cold_factor()), Some(3));
    /// let log = Rule::sliding_log(100, Duration::from_secs(1))?;
    /// assert!(log.with_warmup(Duration::from_secs(30), 3).is_err());
    /// # Ok::<(), weir_core::RuleError>(())
    /// ```
    pub fn with_warmup(mut self, period: Duration, cold_factor: u64) -> Result<Self, RuleError> {
        let refused = match self.algorithm {
            Algorithm::FixedWindow(_)
            | Algorithm::SlidingLog(_)
            | Algorithm::SlidingWindow(_)
            | Algorithm::WeightedWindow(_) => {
                "only gcra and token_bucket warm up: a window counts requests against a limit \
                 per window and has no rate to ramp"
            }
            Algorithm::LeakyBucket(_) => {
                "only gcra and token_bucket warm up: use gcra, the leaky-bucket meter's twin"
            }
            Algorithm::LeakyQueue(_) => {
                "only gcra and token_bucket warm up: the queue promises each request its delay \
                 when it is admitted"
            }
            Algorithm::Concurrency(_) => {
                "only gcra and token_bucket warm up: concurrency leases have no rate"
            }
            Algorithm::Gcra(_) | Algorithm::TokenBucket(_) => "",
        };
        if !refused.is_empty() {
            return Err(RuleError::Inconsistent {
                param: "warmup",
                reason: refused,
            });
        }
        let warmup = WarmUp::new(span("warmup", period)?, cold_factor)?;
        match &mut self.algorithm {
            Algorithm::Gcra(a) => a.warmup = Some(warmup),
            Algorithm::TokenBucket(a) => a.warmup = Some(warmup),
            _ => {}
        }
        Ok(self.rescoped())
    }

    /// The warm-up, if the rule has one.
    pub fn warmup(&self) -> Option<&WarmUp> {
        match &self.algorithm {
            Algorithm::Gcra(a) => a.warmup.as_ref(),
            Algorithm::TokenBucket(a) => a.warmup.as_ref(),
            _ => None,
        }
    }

    /// Adds a lockout: once a check is denied, the key is blocked (see [`Lockout`]).
    pub fn with_lockout(mut self, lockout: Lockout) -> Self {
        self.lockout = Some(lockout);
        self.rescoped()
    }

    /// Sets what happens when the store cannot decide (default: local fallback).
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.on_failure = policy;
        self
    }

    /// Names the rule. A [`Limiter`](crate::Limiter) keeps each rule's records apart: a
    /// key checked under two rules has two records. An unnamed rule is told apart by its
    /// parameters, so changing them starts its keys fresh; a named one by its name, so a
    /// rule changed at run time under the same name (a new limit, window or algorithm)
    /// keeps its keys' usage, read as each algorithm documents ("Rule change"). Name every
    /// rule whose parameters may change while its keys live (the server and the tower
    /// layer name theirs).
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::Rule;
    /// let v1 = Rule::gcra(10, Duration::from_secs(1), 10)?.named("api");
    /// let v2 = Rule::gcra(20, Duration::from_secs(1), 20)?.named("api");
    /// assert_eq!(v1.scope(), v2.scope()); // same records: a rule change
    /// let other = Rule::gcra(10, Duration::from_secs(1), 10)?;
    /// assert_ne!(v1.scope(), other.scope()); // never the same records
    /// # Ok::<(), weir_core::RuleError>(())
    /// ```
    pub fn named(mut self, name: &str) -> Self {
        self.scope = Scope::Named(Self::named_scope(name));
        self
    }

    /// The [`scope`](Self::scope) of every rule [`named`](Self::named) `name`, whatever its
    /// parameters (to give their records a share of their own in a memory store:
    /// [`MemoryStoreBuilder::scope_share`](crate::MemoryStoreBuilder::scope_share)).
    ///
    /// ```
    /// use weir_core::Rule;
    /// assert_eq!(Rule::named_scope("api"), Rule::per_second(5)?.named("api").scope());
    /// # Ok::<(), weir_core::RuleError>(())
    /// ```
    pub fn named_scope(name: &str) -> u64 {
        stable_hash("weir-rule-name", &name)
    }

    /// What tells this rule's records apart from another rule's on the same key: a stable
    /// 64-bit hash of its name, or of its algorithm, parameters and lockout when unnamed
    /// (the failure policy plays no part: it changes no state). The same on every
    /// instance.
    #[inline]
    pub fn scope(&self) -> u64 {
        match self.scope {
            Scope::Named(scope) | Scope::Parameters(scope) => scope,
        }
    }

    /// The failure policy.
    pub fn failure_policy(&self) -> FailurePolicy {
        self.on_failure
    }

    /// The algorithm and its parameters.
    pub fn algorithm(&self) -> &Algorithm {
        &self.algorithm
    }

    /// The lockout policy, if any.
    pub fn lockout(&self) -> Option<&Lockout> {
        self.lockout.as_ref()
    }

    /// The rule's limit: requests per window, capacity, burst, queue depth or leases. Also
    /// the largest cost one request can have.
    pub fn limit(&self) -> u64 {
        match &self.algorithm {
            Algorithm::FixedWindow(a) => a.limit,
            Algorithm::SlidingLog(a) | Algorithm::SlidingWindow(a) => a.limit,
            Algorithm::WeightedWindow(a) => a.limit,
            Algorithm::TokenBucket(a) => a.capacity,
            Algorithm::LeakyBucket(a) => a.capacity,
            Algorithm::Gcra(a) => a.burst,
            Algorithm::LeakyQueue(a) => a.max_depth,
            Algorithm::Concurrency(a) => a.max_leases,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn every_bad_parameter_is_named() {
        let cases = [
            (Rule::fixed_window(0, S), "limit must be greater than zero"),
            (
                Rule::fixed_window(1, Duration::ZERO),
                "window must be greater than zero",
            ),
            (
                Rule::sliding_window(5, Duration::from_secs(10), Duration::from_secs(3)),
                "precision (3000000000 ns) must divide the window (10000000000 ns) evenly",
            ),
            (
                Rule::sliding_window(5, S, Duration::ZERO),
                "precision must be greater than zero",
            ),
            (
                Rule::sliding_log(20_000, S),
                "limit is 20000, above the maximum of 10000",
            ),
            (Rule::gcra(0, S, 1), "rate must be greater than zero"),
            (Rule::gcra(1, S, 0), "burst must be greater than zero"),
            (
                Rule::gcra(1, Duration::ZERO, 1),
                "period must be greater than zero",
            ),
            (
                Rule::token_bucket(0, 1, S),
                "capacity must be greater than zero",
            ),
            (
                Rule::leaky_queue(1, S, 0, S),
                "max_depth must be greater than zero",
            ),
            (Rule::concurrency(0), "max_leases must be greater than zero"),
            (
                Rule::weighted_window(1, Duration::from_secs(150_000 * 86_400)),
                "window is 12960000000000000000, above the maximum of 315360000000000000",
            ),
            (
                Rule::gcra(2_000_000_000, S, 1),
                "rate is 2000000000, above the maximum of 1000000000",
            ),
        ];
        for (result, message) in cases {
            assert_eq!(result.unwrap_err().to_string(), message);
        }
    }

    #[test]
    fn rates_above_a_million_per_second_keep_integer_intervals() {
        let rule = Rule::gcra(10_000_000, S, 100).unwrap();
        let Algorithm::Gcra(g) = rule.algorithm() else {
            unreachable!()
        };
        assert_eq!(g.interval_ns(), 100);
    }

    #[test]
    fn warmup_is_refused_where_there_is_no_rate_to_ramp() {
        let log = Rule::sliding_log(5, S).unwrap().with_warmup(S, 3);
        assert_eq!(
            log.unwrap_err().to_string(),
            "warmup: only gcra and token_bucket warm up: a window counts requests against a \
             limit per window and has no rate to ramp"
        );
        assert!(Rule::gcra(1, S, 1)
            .unwrap()
            .with_warmup(Duration::ZERO, 3)
            .is_err());
        let cold = Rule::gcra(1, S, 1).unwrap().with_warmup(S, 1).unwrap_err();
        assert_eq!(
            cold.to_string(),
            "cold_factor: must be at least 2 (the cold rate is rate / cold_factor)"
        );
        let tb = Rule::token_bucket(5, 1, S)
            .unwrap()
            .with_warmup(S, 4)
            .unwrap();
        assert_eq!(tb.warmup().map(|w| w.period_ns()), Some(1_000_000_000));
        assert_ne!(tb.scope(), Rule::token_bucket(5, 1, S).unwrap().scope());
        let share = Rule::gcra(10, S, 10)
            .unwrap()
            .with_warmup(S, 3)
            .unwrap()
            .share(2);
        assert!(share.warmup().is_some());
    }

    #[test]
    fn initial_tokens_are_checked() {
        let tb = Rule::token_bucket(5, 1, S).unwrap();
        assert!(tb.with_initial_tokens(6).is_err());
        assert!(Rule::per_second(5).unwrap().with_initial_tokens(1).is_err());
    }
}
