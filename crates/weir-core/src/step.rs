//! The one pure step every store runs atomically: apply an [`Op`] to a key's [`Record`] at
//! `now`. The memory store calls it under a shard lock, the reference model in a plain map;
//! the Redis Lua scripts and memcached CAS loops mirror it. Validation happens before any
//! mutation, so an `Err` never leaves a half-changed record.

use std::time::Duration;

use crate::algorithm::{Concurrency, Meter, Ramped};
use crate::decision::{Decision, Usage};
use crate::error::CheckError;
use crate::rule::{Algorithm, Rule};
use crate::state::{Guard, Record, State};
use crate::time::until;

/// An operation on one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op<'a> {
    /// Consume `cost` units if allowed; `cost == 0` is a peek.
    Check {
        /// Units the request uses.
        cost: u64,
    },
    /// Add `n` units of usage, even beyond the limit.
    Penalty {
        /// Units to add.
        n: u64,
    },
    /// Give `n` units of usage back.
    Reward {
        /// Units to give back.
        n: u64,
    },
    /// Block the key for a duration (replaces any current block).
    Block {
        /// How long, in nanoseconds.
        duration_ns: u64,
    },
    /// Let the key try again now: lift its block (manual or lockout) and forgive its
    /// lockout strikes; under a rule with a lockout, also clear the usage that engaged it
    /// (else the next attempt would lock the key out again, escalated). Under a rule without
    /// a lockout, the usage is kept: only the manual block goes. `Reset` is the full wipe.
    Unblock,
    /// Forget everything about the key: usage, block and strikes.
    Reset,
    /// Report usage without changing anything.
    Inspect,
    /// Take or re-enter a concurrency lease.
    Acquire {
        /// Who takes it.
        holder: &'a str,
        /// How long it lives unless released, in nanoseconds.
        ttl_ns: u64,
    },
    /// Release one hold of a concurrency lease.
    Release {
        /// Who releases it.
        holder: &'a str,
    },
}

impl Op<'_> {
    /// Whether the operation may create a record for a key the store does not hold. Only
    /// operations that add usage do; a peek, inspect, reward, unblock, reset or release of
    /// an unknown key must leave it unknown (a stored fresh record is not always the same
    /// as no record: a token bucket starting below capacity would begin refilling).
    pub fn creates_record(&self) -> bool {
        matches!(
            self,
            Op::Check { cost: 1.. } | Op::Penalty { .. } | Op::Block { .. } | Op::Acquire { .. }
        )
    }

    /// Whether a store keeps `record` after this operation: iff it is live, and either the
    /// store held it live before (`held_live`) or the operation adds usage. An expired
    /// record counts as not held, exactly as if a TTL had removed it already.
    pub fn keeps(&self, held_live: bool, record: &Record, now_ns: u64) -> bool {
        record.is_live(now_ns) && (held_live || self.creates_record())
    }

    /// The operation's name, for errors and metrics.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Check { cost: 0 } => "peek",
            Op::Check { .. } => "check",
            Op::Penalty { .. } => "penalty",
            Op::Reward { .. } => "reward",
            Op::Block { .. } => "block",
            Op::Unblock => "unblock",
            Op::Reset => "reset",
            Op::Inspect => "inspect",
            Op::Acquire { .. } => "acquire",
            Op::Release { .. } => "release",
        }
    }
}

/// What an operation returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Check, peek, penalty, reward and acquire return a decision.
    Decision(Decision),
    /// Inspect returns usage.
    Usage(Usage),
    /// Release returns whether the holder had a live lease.
    Released(bool),
    /// Block, unblock and reset.
    Done,
}

/// Calls a [`Meter`] method on the rule's algorithm and the matching state. `None` for
/// concurrency leases (not a meter); the state is known to match (see `apply`).
macro_rules! on_meter {
    ($alg:expr, $state:expr, $method:ident ( $($arg:expr),* )) => {
        match ($alg, $state) {
            (Algorithm::FixedWindow(m), State::FixedWindow(s)) => Some(m.$method(s, $($arg),*)),
            (Algorithm::SlidingLog(m) | Algorithm::SlidingWindow(m), State::Sliding(s)) => {
                Some(m.$method(s, $($arg),*))
            }
            (Algorithm::WeightedWindow(m), State::Weighted(s)) => Some(m.$method(s, $($arg),*)),
            (Algorithm::TokenBucket(m), State::TokenBucket(s)) => Some(m.$method(s, $($arg),*)),
            (Algorithm::LeakyBucket(m), State::LeakyBucket(s)) => Some(m.$method(s, $($arg),*)),
            (Algorithm::Gcra(m), State::Gcra(s)) => Some(m.$method(s, $($arg),*)),
            (Algorithm::Gcra(m), State::GcraWarm(s)) => m.warmed().map(|w| w.$method(s, $($arg),*)),
            (Algorithm::TokenBucket(m), State::TokenBucketWarm(s)) => {
                m.warmed().map(|w| w.$method(s, $($arg),*))
            }
            (Algorithm::LeakyQueue(m), State::LeakyQueue(s)) => Some(m.$method(s, $($arg),*)),
            _ => None,
        }
    };
}

fn unsupported(op: &Op<'_>, rule: &Rule) -> CheckError {
    CheckError::Unsupported {
        op: op.name(),
        algorithm: rule.algorithm.name(),
    }
}

/// Rejects what can never succeed, before anything changes.
pub(crate) fn validate(rule: &Rule, op: &Op<'_>) -> Result<(), CheckError> {
    let is_concurrency = matches!(rule.algorithm, Algorithm::Concurrency(_));
    match op {
        Op::Check { cost } if *cost > 0 && is_concurrency => Err(unsupported(op, rule)),
        Op::Check { cost } if *cost > rule.limit() => Err(CheckError::CostAboveCapacity {
            cost: *cost,
            capacity: rule.limit(),
        }),
        Op::Penalty { .. } | Op::Reward { .. } if is_concurrency => Err(unsupported(op, rule)),
        Op::Acquire { .. } | Op::Release { .. } if !is_concurrency => Err(unsupported(op, rule)),
        Op::Acquire { ttl_ns: 0, .. } => Err(CheckError::Invalid {
            param: "ttl",
            reason: "must be greater than zero",
        }),
        Op::Acquire { holder, .. } | Op::Release { holder }
            if holder.is_empty() || holder.len() > Concurrency::MAX_HOLDER_LEN =>
        {
            Err(CheckError::Invalid {
                param: "holder",
                reason: "must be 1 to 256 bytes",
            })
        }
        _ => Ok(()),
    }
}

/// Applies `op` to `record` at `now_ns`.
///
/// `record` is the key's stored record, or [`Record::fresh`] when the store has none. After
/// the call, the store keeps the record iff [`Record::is_live`] at `now_ns`, and drops it
/// otherwise (it is equivalent to fresh); for a key it did not hold live, it stores the
/// record only if [`Op::creates_record`]. [`Op::keeps`] says it in one call. A record that expired before `now_ns` is treated
/// as fresh, exactly as a store with TTLs would have forgotten it.
pub fn apply(
    rule: &Rule,
    record: &mut Record,
    op: &Op<'_>,
    now_ns: u64,
) -> Result<Outcome, CheckError> {
    validate(rule, op)?;
    // `expires_ns == 0` with no guard is a `Record::fresh` a store just made for an unknown
    // key (stores never keep a record that is not live): making it again would allocate
    // twice for the boxed states.
    let just_made = record.expires_ns == 0 && record.guard.is_none();
    if record.expires_ns <= now_ns && !(just_made && record.state.belongs_to(&rule.algorithm)) {
        record.guard = None;
        record.state = State::fresh(&rule.algorithm, now_ns);
    } else if !record.state.belongs_to(&rule.algorithm) {
        record.state = State::fresh(&rule.algorithm, now_ns);
    }
    if let Some(g) = record.guard.as_deref() {
        if g.blocked_until_ns <= now_ns && g.strikes_expire_ns <= now_ns {
            record.guard = None;
        }
    }

    let outcome = match *op {
        Op::Check { cost } => Outcome::Decision(check(rule, record, now_ns, cost)),
        Op::Penalty { n } => {
            on_meter!(&rule.algorithm, &mut record.state, penalize(now_ns, n));
            Outcome::Decision(check(rule, record, now_ns, 0))
        }
        Op::Reward { n } => {
            on_meter!(&rule.algorithm, &mut record.state, reward(now_ns, n));
            Outcome::Decision(check(rule, record, now_ns, 0))
        }
        Op::Block { duration_ns } => {
            let guard = record.guard.get_or_insert_with(Box::default);
            guard.blocked_until_ns = now_ns.saturating_add(duration_ns);
            Outcome::Done
        }
        Op::Unblock => {
            record.guard = None;
            if rule.lockout.is_some() {
                record.state = State::fresh(&rule.algorithm, now_ns);
            }
            Outcome::Done
        }
        Op::Reset => {
            *record = Record::fresh(rule, now_ns);
            Outcome::Done
        }
        Op::Inspect => Outcome::Usage(inspect(rule, record, now_ns)),
        Op::Acquire { holder, ttl_ns } => {
            Outcome::Decision(acquire(rule, record, now_ns, holder, ttl_ns))
        }
        Op::Release { holder } => {
            let released = match (&rule.algorithm, &mut record.state) {
                (Algorithm::Concurrency(c), State::Concurrency(s)) => c.release(s, now_ns, holder),
                _ => false,
            };
            Outcome::Released(released)
        }
    };
    record.expires_ns = expiry(rule, record);
    Ok(outcome)
}

/// [`apply`] of `Op::Check { cost }`, returning the decision itself.
pub fn check_now(
    rule: &Rule,
    record: &mut Record,
    cost: u64,
    now_ns: u64,
) -> Result<Decision, CheckError> {
    match apply(rule, record, &Op::Check { cost }, now_ns)? {
        Outcome::Decision(d) => Ok(d),
        _ => Err(CheckError::Unsupported {
            op: "check",
            algorithm: rule.algorithm.name(),
        }),
    }
}

/// A denial while the key is blocked: nothing else is looked at.
fn blocked(rule: &Rule, record: &Record, now_ns: u64) -> Option<Decision> {
    let until_ns = record.blocked_until_ns();
    (until_ns > now_ns).then(|| {
        let wait = until(until_ns, now_ns);
        Decision::deny(
            rule.limit(),
            0,
            wait.max(until(record.expires_ns, now_ns)),
            wait,
        )
    })
}

fn check(rule: &Rule, record: &mut Record, now_ns: u64, cost: u64) -> Decision {
    if let Some(denied) = blocked(rule, record, now_ns) {
        return denied;
    }
    let decision = match on_meter!(&rule.algorithm, &mut record.state, check(now_ns, cost)) {
        Some(d) => d,
        None => return acquire(rule, record, now_ns, "", 0),
    };
    match rule.lockout {
        Some(lockout) if !decision.allowed && cost > 0 => {
            let guard = record.guard.get_or_insert_with(Box::default);
            let block_ns = lockout.duration_ns(guard.strikes);
            guard.blocked_until_ns = now_ns.saturating_add(block_ns);
            guard.strikes = guard.strikes.saturating_add(1);
            guard.strikes_expire_ns = guard.blocked_until_ns.saturating_add(lockout.forgive_ns);
            let wait = Duration::from_nanos(block_ns);
            // As `blocked` answers from the next instant on (a cached denial repeats this
            // answer, so the two must agree): until the record is fresh again.
            let fresh_at = until(expiry(rule, record), now_ns);
            Decision {
                retry_after: wait,
                reset_after: decision.reset_after.max(wait).max(fresh_at),
                remaining: 0,
                ..decision
            }
        }
        _ => decision,
    }
}

/// Acquire (or, with an empty holder, peek at) a concurrency lease.
fn acquire(rule: &Rule, record: &mut Record, now_ns: u64, holder: &str, ttl_ns: u64) -> Decision {
    if let Some(denied) = blocked(rule, record, now_ns) {
        return denied;
    }
    match (&rule.algorithm, &mut record.state) {
        (Algorithm::Concurrency(c), State::Concurrency(s)) => {
            c.acquire(s, now_ns, holder, ttl_ns, holder.is_empty())
        }
        _ => Decision::deny(rule.limit(), 0, Duration::ZERO, Duration::ZERO),
    }
}

fn used(rule: &Rule, record: &Record, now_ns: u64) -> u64 {
    match (&rule.algorithm, &record.state) {
        (Algorithm::Concurrency(c), State::Concurrency(s)) => c.used(s, now_ns),
        (alg, state) => on_meter!(alg, state, used(now_ns)).unwrap_or(0),
    }
}

fn inspect(rule: &Rule, record: &Record, now_ns: u64) -> Usage {
    let used = used(rule, record, now_ns);
    let expires_ns = expiry(rule, record);
    let guard = record.guard.as_deref().copied().unwrap_or_default();
    Usage {
        used,
        limit: rule.limit(),
        remaining: rule.limit().saturating_sub(used),
        blocked_for: until(guard.blocked_until_ns, now_ns),
        strikes: guard.strikes,
        reset_after: until(expires_ns, now_ns),
    }
}

/// When `record` becomes equivalent to a fresh one under `rule`: the later of its state's
/// and its guard's ends (`Record::expires_ns` after every step; `restore.rs` bounds it).
pub(crate) fn expiry(rule: &Rule, record: &Record) -> u64 {
    let state_ns = match (&rule.algorithm, &record.state) {
        (Algorithm::Concurrency(c), State::Concurrency(s)) => c.fresh_at_ns(s),
        (alg, state) => on_meter!(alg, state, fresh_at_ns()).unwrap_or(0),
    };
    let guard_ns = record
        .guard
        .as_deref()
        .map_or(0, |g: &Guard| g.blocked_until_ns.max(g.strikes_expire_ns));
    state_ns.max(guard_ns)
}
