//! `CL.THROTTLE key max_burst count_per_period period [quantity]`, answered as redis-cell
//! answers it (brandur/redis-cell 0.5.0, `src/lib.rs` and `src/cell/mod.rs`), decided by
//! Weir's GCRA on whichever store the limiter has.
//!
//! redis-cell's GCRA: emission interval `T = trunc(period_ns / count)` (a float division,
//! as redis-cell does it), `limit = max_burst + 1`, tolerance `T × limit`. That is Weir's
//! `Rule::gcra(1, T, max_burst + 1)`: a request of `n` passes iff
//! `max(TAT, now) + n·T − now ≤ T × limit`. Every call on a key shares one record whatever
//! its parameters (the rule is named `cl.throttle`), as redis-cell keeps one TAT per key,
//! so changed parameters re-read the same TAT. The check is the engine's
//! ([`Engine::check_rule`]: its store, its judgement of a failed store, its metrics).
//!
//! The reply `[limited, limit, remaining, retry_after, reset_after]` is computed from
//! redis-cell's own formulas: `remaining` from whole microseconds, the seconds truncated
//! and then rounded up only when the fraction holds a whole millisecond, `retry_after`
//! `-1` when allowed or when the quantity can never fit. Errors are redis-cell's, word for
//! word (`Cell error: Store error: …`). Where redis-cell would overflow, compute a negative
//! rate, accept a negative quantity or divide into nonsense, Weir refuses with an error in
//! the same form (see the crate docs, "Differences").

use std::time::Duration;

use bytes::Bytes;
use weir_core::{Key, Rule, MAX_SPAN};
use weir_engine::Engine;

use super::args::{int, lossy, own_key};
use super::dispatch::{failed, Outcome};
use crate::protocol::Reply;

/// The rule name of every `CL.THROTTLE` record (and its metrics label).
const RULE: &str = "cl.throttle";

/// redis-cell's parameters, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quota {
    /// Emission interval `T` in ns (positive).
    pub(crate) interval_ns: i128,
    /// `max_burst + 1` (may be zero or negative: redis-cell answers those too).
    pub(crate) limit: i64,
    /// `T × limit` in ns.
    pub(crate) tolerance_ns: i128,
    /// `T × quantity` in ns.
    pub(crate) increment_ns: i128,
}

/// redis-cell's answer, before rounding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) limited: bool,
    pub(crate) limit: i64,
    pub(crate) remaining: i64,
    /// `None`: redis-cell's `-1`.
    pub(crate) retry_after_ns: Option<i128>,
    pub(crate) reset_after_ns: i128,
}

fn cell_error(message: impl std::fmt::Display) -> Reply {
    Reply::error(format!("Cell error: Store error: {message}"))
}

/// `CL.THROTTLE`, decided through the engine (its store, its judgement of a failed
/// store, its metrics), with parameters whose window is at most `max_window`.
pub(crate) async fn throttle(
    engine: &Engine,
    args: &[Bytes],
    max_window: Duration,
) -> (Reply, Outcome) {
    let (key, quota, quantity) = match parse(args, max_window) {
        Ok(parsed) => parsed,
        Err(reply) => return (reply, Outcome::Invalid),
    };
    let Some(key) = own_key(key) else {
        let message = format!("key is longer than {} bytes", Key::MAX_LEN - 1);
        return (cell_error(message), Outcome::Invalid);
    };
    let Ok(interval) = u64::try_from(quota.interval_ns) else {
        return (cell_error("rate is too slow"), Outcome::Invalid);
    };
    let decide_here = quantity > 0 && quota.limit >= 1 && quota.increment_ns <= quota.tolerance_ns;
    let burst = u64::try_from(quota.limit).unwrap_or(1).max(1);
    let rule = match Rule::gcra(1, Duration::from_nanos(interval), burst) {
        Ok(rule) => rule.named(RULE),
        Err(e) => return (cell_error(e), Outcome::Invalid),
    };
    let cost = if decide_here { quantity } else { 0 };
    let decision = match engine
        .check_rule(&key, &rule, u64::try_from(cost).unwrap_or(0), RULE)
        .await
    {
        Ok(checked) => checked.decision,
        Err(e) => return (cell_error(&e), failed(&e)),
    };
    let ttl_ns = i128::try_from(decision.reset_after.as_nanos()).unwrap_or(i128::MAX);
    let answer = if decide_here {
        let retry = i128::try_from(decision.retry_after.as_nanos()).unwrap_or(i128::MAX);
        finish(
            &quota,
            !decision.allowed,
            ttl_ns,
            (!decision.allowed).then_some(retry),
        )
    } else {
        read_only(&quota, ttl_ns)
    };
    let outcome = if answer.limited {
        Outcome::OverLimit
    } else {
        Outcome::Ok
    };
    (reply(&answer), outcome)
}

/// The arguments, checked in redis-cell's order and with its messages; then Weir's bounds,
/// `max_window` among them.
pub(crate) fn parse(args: &[Bytes], max_window: Duration) -> Result<(&[u8], Quota, i64), Reply> {
    if args.len() != 5 && args.len() != 6 {
        return Err(cell_error(
            "Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]",
        ));
    }
    let number = |arg: &Bytes| {
        int(arg).ok_or_else(|| cell_error(format!("Couldn't parse as integer: {}", lossy(arg))))
    };
    let max_burst = number(&args[2])?;
    let count = number(&args[3])?;
    let period = number(&args[4])?;
    let quantity = match args.get(5) {
        Some(arg) => number(arg)?,
        None => 1,
    };
    let interval_ns = i128::from(emission_interval_ns(count, period));
    if interval_ns == 0 {
        return Err(cell_error("Zero rates are not supported"));
    }
    if interval_ns < 0 {
        return Err(cell_error("Negative rates are not supported"));
    }
    if interval_ns > i128::try_from(MAX_SPAN.as_nanos()).unwrap_or(i128::MAX) {
        return Err(cell_error(
            "Rates slower than one per 10 years are not supported",
        ));
    }
    if quantity < 0 {
        return Err(cell_error("Negative quantities are not supported"));
    }
    let limit = max_burst
        .checked_add(1)
        .ok_or_else(|| cell_error("max_burst is too large"))?;
    let tolerance_ns = interval_ns * i128::from(limit);
    let increment_ns = interval_ns * i128::from(quantity);
    // redis-cell multiplies in i64 nanoseconds: beyond that it wraps around.
    let fits = |ns: i128| i64::try_from(ns).is_ok();
    if !fits(tolerance_ns) {
        return Err(cell_error("max_burst × period / count is above 292 years"));
    }
    if !fits(increment_ns) {
        return Err(cell_error("quantity × period / count is above 292 years"));
    }
    let max_window_ns = i128::try_from(max_window.min(MAX_SPAN).as_nanos()).unwrap_or(i128::MAX);
    if tolerance_ns > max_window_ns {
        return Err(cell_error(format!(
            "(max_burst + 1) × period / count is above this server's longest window, {} s \
             (weir serve --resp-max-window)",
            max_window.min(MAX_SPAN).as_secs()
        )));
    }
    let quota = Quota {
        interval_ns,
        limit,
        tolerance_ns,
        increment_ns,
    };
    Ok((&args[1], quota, quantity))
}

/// redis-cell's `Rate::per_period`: `period` seconds over `count`, divided as `f64` and
/// truncated toward zero (0 when either is 0).
#[allow(clippy::cast_possible_truncation)] // redis-cell's own `as` conversions, on purpose
pub(crate) fn emission_interval_ns(count: i64, period_s: i64) -> i64 {
    let ns = i128::from(period_s) * 1_000_000_000;
    if count == 0 || ns == 0 {
        return 0;
    }
    ((ns as f64) / (count as f64)) as i64
}

/// The answer when Weir's check could not stand for redis-cell's (a peek, a quantity that
/// can never fit, a limit of zero or less): computed from the key's `TAT − now` alone,
/// nothing consumed, exactly as redis-cell's denial or zero-quantity path.
pub(crate) fn read_only(quota: &Quota, ttl_ns: i128) -> Answer {
    let limited = ttl_ns + quota.increment_ns > quota.tolerance_ns;
    let retry = (limited && quota.increment_ns <= quota.tolerance_ns)
        .then(|| ttl_ns + quota.increment_ns - quota.tolerance_ns);
    finish(quota, limited, ttl_ns, retry)
}

/// redis-cell's result fields from `ttl` (the reset after, in ns).
#[allow(clippy::cast_possible_truncation)] // redis-cell's own `as` conversions, on purpose
pub(crate) fn finish(quota: &Quota, limited: bool, ttl_ns: i128, retry_ns: Option<i128>) -> Answer {
    let next = quota.tolerance_ns - ttl_ns;
    let remaining = if next > -quota.interval_ns {
        // whole_microseconds truncates toward zero; the f64 quotient saturates into i64
        // (redis-cell's own arithmetic, infinities and NaN included).
        ((next / 1_000) as f64 / (quota.interval_ns / 1_000) as f64) as i64
    } else {
        0
    };
    Answer {
        limited,
        limit: quota.limit,
        remaining,
        retry_after_ns: retry_ns,
        reset_after_ns: ttl_ns,
    }
}

/// redis-cell's rounding: seconds as `f64`, truncated, plus one if the fraction holds at
/// least one whole millisecond.
#[allow(clippy::cast_possible_truncation)] // redis-cell's own `as` conversions, on purpose
pub(crate) fn seconds(ns: i128) -> i64 {
    let secs = ns / 1_000_000_000;
    let nanos = ns % 1_000_000_000;
    let whole = (secs as f64 + nanos as f64 / 1_000_000_000.0) as i64;
    if nanos / 1_000_000 > 0 {
        whole.saturating_add(1)
    } else {
        whole
    }
}

/// The five integers.
pub(crate) fn reply(answer: &Answer) -> Reply {
    Reply::Array(vec![
        Reply::Int(i64::from(answer.limited)),
        Reply::Int(answer.limit),
        Reply::Int(answer.remaining),
        Reply::Int(answer.retry_after_ns.map_or(-1, seconds)),
        Reply::Int(seconds(answer.reset_after_ns)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    // redis-cell's it_creates_rates_from_* and it_supports_zero_rates.
    #[test]
    fn rates_are_redis_cells() {
        assert_eq!(emission_interval_ns(24, 86_400), 3_600 * S); // per_day(24): 1 h
        assert_eq!(emission_interval_ns(6, 3_600), 600 * S); // per_hour(6): 10 min
        assert_eq!(emission_interval_ns(6, 60), 10 * S); // per_minute(6): 10 s
        assert_eq!(emission_interval_ns(6, 120), 20 * S); // per_period(6, 2 min): 20 s
        assert_eq!(emission_interval_ns(5, 1), 200_000_000); // per_second(5): 200 ms
        assert_eq!(emission_interval_ns(0, 1), 0);
        assert_eq!(emission_interval_ns(1, 0), 0);
        assert_eq!(
            emission_interval_ns(3, 1),
            333_333_333,
            "truncated, not rounded up"
        );
        assert_eq!(emission_interval_ns(-2, -1), 500_000_000);
        assert_eq!(emission_interval_ns(-2, 1), -500_000_000);
    }

    #[test]
    fn seconds_round_up_only_a_whole_millisecond() {
        let ms = 1_000_000;
        assert_eq!(seconds(0), 0);
        assert_eq!(seconds(-i128::from(S)), -1);
        assert_eq!(seconds(999_999), 0);
        assert_eq!(seconds(ms), 1);
        assert_eq!(seconds(i128::from(S) + 999_999), 1);
        assert_eq!(seconds(i128::from(S) + ms), 2);
        assert_eq!(seconds(3_900 * ms), 4);
    }

    #[test]
    fn remaining_uses_whole_microseconds_as_redis_cell_does() {
        let quota = |t: i128, limit: i64| Quota {
            interval_ns: t,
            limit,
            tolerance_ns: t * i128::from(limit),
            increment_ns: t,
        };
        // 1999 ns per unit is "1 µs" to redis-cell: 3 units left read as 5.
        assert_eq!(finish(&quota(1_999, 4), false, 1_999, None).remaining, 5);
        // Below one per µs: x / 0.0 is infinite (saturates), 0 / 0.0 is NaN (0).
        assert_eq!(
            finish(&quota(500, 10), false, 500, None).remaining,
            i64::MAX
        );
        assert_eq!(finish(&quota(500, 1), false, 500, None).remaining, 0);
        // Past the tolerance by a whole interval or more: 0.
        assert_eq!(
            finish(&quota(S.into(), 1), true, 3 * i128::from(S), None).remaining,
            0
        );
    }
}
