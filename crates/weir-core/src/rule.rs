//! Rules: an algorithm with validated parameters, plus an optional lockout. Built once (from
//! code or, later, from YAML) and checked when built, so a bad parameter is a typed error that
//! names it, never a surprise at check time.

use crate::scope::{stable_hash, Scope};
use std::time::Duration;

use crate::algorithm::{
    interval_ns, Concurrency, FixedWindow, Gcra, LeakyBucket, LeakyQueue, Sliding, TokenBucket,
    WarmUp, WeightedWindow,
};
use crate::decision::Decision;
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

/// Lock a key out for a while once it hits its limit, escalating for repeat offenders.
///
/// The first denied check blocks the key for `duration`; each further lockout before the
/// strikes are forgiven doubles it (`D, 2D, 4D, …`) up to `max`. Strikes are forgotten
/// `forgive_after` after the last lockout ends (default 24 hours). `Limiter::reset` clears
/// the count and the strikes (the "successful login" case); `unblock` lifts the lockout,
/// forgives the strikes and clears the count (the operator's "let them try again").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Lockout {
    pub(crate) base_ns: u64,
    pub(crate) max_ns: u64,
    pub(crate) forgive_ns: u64,
}

impl Lockout {
    /// A lockout of `duration` that does not escalate.
    pub fn new(duration: Duration) -> Result<Self, RuleError> {
        let base_ns = span("lockout.duration", duration)?;
        Ok(Self {
            base_ns,
            max_ns: base_ns,
            forgive_ns: duration_ns(Duration::from_secs(24 * 3600)),
        })
    }

    /// Escalates: each repeat doubles the lockout, up to `max`.
    pub fn escalating(mut self, max: Duration) -> Result<Self, RuleError> {
        let max_ns = span("lockout.max", max)?;
        if max_ns < self.base_ns {
            return Err(RuleError::Inconsistent {
                param: "lockout.max",
                reason: "must be at least lockout.duration",
            });
        }
        self.max_ns = max_ns;
        Ok(self)
    }

    /// Forgets strikes this long after the last lockout ends (at most [`MAX_SPAN`]).
    pub fn forgive_after(mut self, after: Duration) -> Self {
        self.forgive_ns = duration_ns(after.min(MAX_SPAN));
        self
    }

    /// The first lockout's length.
    pub fn duration(&self) -> Duration {
        Duration::from_nanos(self.base_ns)
    }

    /// The longest a lockout escalates to (equal to [`duration`](Self::duration) when it
    /// does not escalate).
    pub fn max_duration(&self) -> Duration {
        Duration::from_nanos(self.max_ns)
    }

    /// How long after the last lockout ends its strikes are forgotten.
    pub fn forgiven_after(&self) -> Duration {
        Duration::from_nanos(self.forgive_ns)
    }

    /// The lockout for a key that has served `strikes` lockouts already.
    pub(crate) fn duration_ns(&self, strikes: u32) -> u64 {
        let factor = 1u64.checked_shl(strikes.min(63)).unwrap_or(u64::MAX);
        self.base_ns.saturating_mul(factor).min(self.max_ns)
    }
}

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

impl Rule {
    /// The time over which [`limit`](Self::limit) applies: the window of the window
    /// algorithms, and the time to go from empty to full (`limit × interval`) for the
    /// buckets, GCRA and the queue. Zero for concurrency leases, which have no window. This
    /// is the `w` of an IETF `RateLimit-Policy` header.
    pub fn window(&self) -> Duration {
        let ns = match &self.algorithm {
            Algorithm::FixedWindow(a) => a.window_ns,
            Algorithm::SlidingLog(a) | Algorithm::SlidingWindow(a) => a.window_ns,
            Algorithm::WeightedWindow(a) => a.window_ns,
            Algorithm::TokenBucket(a) => a.capacity.saturating_mul(a.interval_ns),
            Algorithm::LeakyBucket(a) => a.capacity.saturating_mul(a.interval_ns),
            Algorithm::Gcra(a) => a.tolerance_ns,
            Algorithm::LeakyQueue(a) => a.max_depth.saturating_mul(a.interval_ns),
            Algorithm::Concurrency(_) => 0,
        };
        Duration::from_nanos(ns)
    }

    /// Right after `allowed`, a check of `cost` under this rule that left fewer than `cost`
    /// units (`remaining < cost`): how long the same check stays denied if nothing else
    /// happens to the key. This is the `retry_after` that check would get, read off the
    /// allowed decision alone, so a caller can answer it without asking the store (the
    /// over-limit cache in `weir-resilience` does).
    ///
    /// Exact for the fixed window (until the window ends), and for GCRA, the token bucket
    /// and the leaky-bucket meter (`reset_after − (limit − cost) × interval`: the time until
    /// `cost` units are back). If the decision came from a share of this rule
    /// ([`share`](Self::share): a longer interval, a smaller limit), it is a lower bound,
    /// never later than the truth. `None` when the decision does not tell: it allowed with
    /// `cost` or more to spare, the cost is zero, or the algorithm's next free unit is not
    /// in it (the sliding log and window counters, the queue, leases).
    ///
    /// ```
    /// # use std::time::Duration;
    /// # use weir_core::{Key, MemoryStore, Op, Outcome, Rule};
    /// let rule = Rule::gcra(10, Duration::from_secs(1), 2)?; // one per 100 ms, burst 2
    /// let store = MemoryStore::default();
    /// let key = Key::new("k")?;
    /// let check = |now| match store.apply_now(&key, &rule, Op::Check { cost: 1 }, now) {
    ///     Ok(Outcome::Decision(d)) => d,
    ///     other => panic!("{other:?}"),
    /// };
    /// check(0);
    /// let last = check(0); // the burst is spent
    /// let wait = rule.retry_after_allowed(&last, 1).unwrap();
    /// assert_eq!(wait, Duration::from_millis(100));
    /// assert_eq!(check(0).retry_after, wait);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn retry_after_allowed(&self, allowed: &Decision, cost: u64) -> Option<Duration> {
        if !allowed.allowed || cost == 0 || allowed.remaining >= cost {
            return None;
        }
        let reset_ns = duration_ns(allowed.reset_after);
        let back_ns = |limit: u64, interval_ns: u64| {
            let spare = limit.saturating_sub(cost).saturating_mul(interval_ns);
            reset_ns.saturating_sub(spare)
        };
        let wait_ns = match &self.algorithm {
            Algorithm::FixedWindow(_) => reset_ns,
            Algorithm::Gcra(a) => back_ns(a.burst, a.interval_ns),
            Algorithm::TokenBucket(a) => back_ns(a.capacity, a.interval_ns),
            Algorithm::LeakyBucket(a) => back_ns(a.capacity, a.interval_ns),
            Algorithm::SlidingLog(_)
            | Algorithm::SlidingWindow(_)
            | Algorithm::WeightedWindow(_)
            | Algorithm::LeakyQueue(_)
            | Algorithm::Concurrency(_) => return None,
        };
        (wait_ns > 0).then(|| Duration::from_nanos(wait_ns))
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
    fn lockout_escalates_up_to_its_cap() {
        let l = Lockout::new(Duration::from_secs(60))
            .unwrap()
            .escalating(Duration::from_secs(300))
            .unwrap();
        let mins: Vec<u64> = (0..5).map(|k| l.duration_ns(k) / 60_000_000_000).collect();
        assert_eq!(mins, [1, 2, 4, 5, 5]);
        assert!(Lockout::new(Duration::ZERO).is_err());
    }

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
