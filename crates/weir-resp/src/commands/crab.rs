//! `THROTTLE key max_burst count_per_period period [quantity]`, with throttlecrab's
//! arguments, errors and reply (lazureykis/throttlecrab 0.4.40,
//! `throttlecrab-server/src/transport/redis/mod.rs` and `throttlecrab/src/core/`):
//! `[allowed, limit, remaining, reset_after, retry_after]`, `allowed` 1 when allowed,
//! `limit = max_burst`, the seconds truncated.
//!
//! throttlecrab's GCRA: `T = trunc(period × 10⁹ / count)` ns (as `f64`), a fresh key takes
//! `max_burst` at once and one more per `T`: Weir's `Rule::gcra(1, T, max_burst)` (named
//! `throttle`, one record per key whatever the parameters). Its `remaining` is
//! `⌊(max_burst·T − (TAT − now)) / T⌋`, its `reset_after` `TAT − now + (max_burst − 2)·T`
//! (when its stored key expires), its `retry_after` the exact wait, all reproduced here.
//! One deliberate difference: throttlecrab lets a key idle for less than its key's
//! lifetime start from a TAT in the past and so pass more than `max_burst` at once; Weir
//! never does (its TAT is `max(TAT, now)`, as in standard GCRA and redis-cell).

use std::time::Duration;

use bytes::Bytes;
use weir_core::{Key, Rule, MAX_SPAN};
use weir_engine::Engine;

use super::args::{int, own_key, wrong_arity};
use super::dispatch::{failed, Outcome};
use crate::protocol::Reply;

/// The rule name of every `THROTTLE` record (and its metrics label).
const RULE: &str = "throttle";

/// throttlecrab's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Answer {
    pub(crate) allowed: bool,
    pub(crate) limit: i64,
    pub(crate) remaining: i64,
    pub(crate) reset_after_ns: i128,
    pub(crate) retry_after_ns: i128,
}

/// Checked parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Quota {
    /// `T` in ns; 0 when the rate is faster than one per ns (then everything passes).
    pub(crate) interval_ns: i128,
    pub(crate) burst: i64,
    pub(crate) quantity: i64,
}

/// `THROTTLE`, decided through the engine (its store, its judgement of a failed store,
/// its metrics), with parameters whose window is at most `max_window`.
pub(crate) async fn throttle(
    engine: &Engine,
    args: &[Bytes],
    max_window: Duration,
) -> (Reply, Outcome) {
    let (key, quota) = match parse(args, max_window) {
        Ok(parsed) => parsed,
        Err(reply) => return (reply, Outcome::Invalid),
    };
    if quota.interval_ns == 0 {
        // T = 0: throttlecrab allows everything, with nothing remaining and no wait.
        let answer = Answer {
            allowed: true,
            limit: quota.burst,
            remaining: 0,
            reset_after_ns: 0,
            retry_after_ns: 0,
        };
        return (reply(&answer), Outcome::Ok);
    }
    let Some(key) = own_key(key) else {
        let message = format!("ERR invalid key: longer than {} bytes", Key::MAX_LEN - 1);
        return (Reply::error(message), Outcome::Invalid);
    };
    let (Ok(interval), Ok(burst)) = (u64::try_from(quota.interval_ns), u64::try_from(quota.burst))
    else {
        return (
            Reply::error("ERR invalid rate limit parameters"),
            Outcome::Invalid,
        );
    };
    let rule = match Rule::gcra(1, Duration::from_nanos(interval), burst) {
        Ok(rule) => rule.named(RULE),
        Err(e) => return (Reply::error(format!("ERR {e}")), Outcome::Invalid),
    };
    let decide_here = quota.quantity >= 1 && quota.quantity <= quota.burst;
    let cost = if decide_here { quota.quantity } else { 0 };
    let decision = match engine
        .check_rule(&key, &rule, u64::try_from(cost).unwrap_or(0), RULE)
        .await
    {
        Ok(checked) => checked.decision,
        Err(e) => return (Reply::error(format!("ERR internal error: {e}")), failed(&e)),
    };
    let ttl_ns = i128::try_from(decision.reset_after.as_nanos()).unwrap_or(i128::MAX);
    let answer = if decide_here {
        let retry = i128::try_from(decision.retry_after.as_nanos()).unwrap_or(i128::MAX);
        finish(
            &quota,
            decision.allowed,
            ttl_ns,
            if decision.allowed { 0 } else { retry },
        )
    } else {
        read_only(&quota, ttl_ns)
    };
    let outcome = if answer.allowed {
        Outcome::Ok
    } else {
        Outcome::OverLimit
    };
    (reply(&answer), outcome)
}

/// The arguments, in throttlecrab's order and with its messages; then Weir's bounds,
/// `max_window` among them.
pub(crate) fn parse(args: &[Bytes], max_window: Duration) -> Result<(&[u8], Quota), Reply> {
    if args.len() < 5 || args.len() > 6 {
        return Err(wrong_arity("throttle"));
    }
    let number = |arg: &Bytes, name: &str| {
        int(arg).ok_or_else(|| Reply::error(format!("ERR invalid {name}")))
    };
    let burst = number(&args[2], "max_burst")?;
    let count = number(&args[3], "count_per_period")?;
    let period = number(&args[4], "period")?;
    let quantity = match args.get(5) {
        Some(arg) => number(arg, "quantity")?,
        None => 1,
    };
    if quantity < 0 {
        return Err(Reply::error(format!("ERR negative quantity: {quantity}")));
    }
    if burst <= 0 || count <= 0 || period <= 0 {
        return Err(Reply::error("ERR invalid rate limit parameters"));
    }
    if burst - 1 > i64::from(u32::MAX) {
        // throttlecrab multiplies T by `(max_burst - 1) as u32`: beyond, it truncates.
        return Err(Reply::error(format!(
            "ERR invalid max_burst: above {}",
            u64::from(u32::MAX) + 1
        )));
    }
    let interval_ns = i128::from(emission_interval_ns(count, period));
    if interval_ns > i128::try_from(MAX_SPAN.as_nanos()).unwrap_or(i128::MAX) {
        return Err(Reply::error(
            "ERR invalid rate limit parameters: slower than one per 10 years",
        ));
    }
    let max_window = max_window.min(MAX_SPAN);
    if interval_ns * i128::from(burst) > i128::try_from(max_window.as_nanos()).unwrap_or(i128::MAX)
    {
        return Err(Reply::error(format!(
            "ERR invalid rate limit parameters: max_burst × period / count is above this \
             server's longest window, {} s (weir serve --resp-max-window)",
            max_window.as_secs()
        )));
    }
    Ok((
        &args[1],
        Quota {
            interval_ns,
            burst,
            quantity,
        },
    ))
}

/// throttlecrab's `Rate::from_count_and_period`: `(period as f64 × 1e9 / count as f64) as
/// u64`, saturating (count and period are positive here).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // throttlecrab's own `as`
pub(crate) fn emission_interval_ns(count: i64, period_s: i64) -> u64 {
    (period_s as f64 * 1_000_000_000.0 / count as f64) as u64
}

/// The answer without consuming anything (a quantity of 0, or above `max_burst`), from the
/// key's `TAT − now` alone.
pub(crate) fn read_only(quota: &Quota, ttl_ns: i128) -> Answer {
    let need = ttl_ns + quota.interval_ns * i128::from(quota.quantity);
    let tolerance = quota.interval_ns * i128::from(quota.burst);
    let allowed = need <= tolerance;
    finish(
        quota,
        allowed,
        ttl_ns,
        if allowed { 0 } else { need - tolerance },
    )
}

/// throttlecrab's fields from `ttl = TAT − now` after the decision.
pub(crate) fn finish(quota: &Quota, allowed: bool, ttl_ns: i128, retry_ns: i128) -> Answer {
    let t = quota.interval_ns;
    let burst = i128::from(quota.burst);
    let remaining = ((burst * t - ttl_ns) / t).max(0);
    Answer {
        allowed,
        limit: quota.burst,
        remaining: i64::try_from(remaining).unwrap_or(i64::MAX),
        reset_after_ns: (ttl_ns + (burst - 2) * t).max(0),
        retry_after_ns: retry_ns.max(0),
    }
}

/// Whole seconds, truncated (throttlecrab's `Duration::as_secs`).
fn seconds(ns: i128) -> i64 {
    i64::try_from(ns / 1_000_000_000).unwrap_or(i64::MAX)
}

/// The five integers, in throttlecrab's order.
pub(crate) fn reply(answer: &Answer) -> Reply {
    Reply::Array(vec![
        Reply::Int(i64::from(answer.allowed)),
        Reply::Int(answer.limit),
        Reply::Int(answer.remaining),
        Reply::Int(seconds(answer.reset_after_ns)),
        Reply::Int(seconds(answer.retry_after_ns)),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_throttlecrabs() {
        assert_eq!(emission_interval_ns(100, 60), 600_000_000);
        assert_eq!(emission_interval_ns(3, 1), 333_333_333);
        assert_eq!(emission_interval_ns(2_000_000_000, 1), 0);
        assert_eq!(emission_interval_ns(1, i64::MAX), u64::MAX, "saturates");
    }

    #[test]
    fn reset_after_is_when_throttlecrabs_key_expires() {
        let quota = Quota {
            interval_ns: 600_000_000,
            burst: 10,
            quantity: 1,
        };
        // One request on a fresh key: TAT − now = T, reset after T + 8·T = 5.4 s.
        let answer = finish(&quota, true, 600_000_000, 0);
        assert_eq!(
            (answer.remaining, answer.reset_after_ns),
            (9, 5_400_000_000)
        );
        // A burst of 1: the reset never goes below zero.
        let one = Quota { burst: 1, ..quota };
        assert_eq!(finish(&one, true, 0, 0).reset_after_ns, 0);
    }
}
