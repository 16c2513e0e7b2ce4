//! What comes back from a script: the reply arrays of `lua/step.lua` (`S.reply`) and
//! `lua/multi.lua`, read into [`Outcome`] and [`Decisions`]. Anything else is a
//! [`StoreError::Corrupt`]; a refusal at the horizon is [`CheckError::Invalid`].

use std::time::Duration;

use redis::Value;
use weir_core::{CheckError, Decision, Decisions, Op, Outcome, Rule, StoreError, Usage};

fn corrupt(what: &str) -> CheckError {
    CheckError::Store(StoreError::Corrupt(what.to_owned()))
}

fn items(value: Value) -> Result<Vec<Value>, CheckError> {
    match value {
        Value::Array(items) => Ok(items),
        _ => Err(corrupt("the script's reply is not an array")),
    }
}

fn int(items: &[Value], i: usize) -> Result<i64, CheckError> {
    match items.get(i) {
        Some(Value::Int(v)) => Ok(*v),
        _ => Err(corrupt("the script's reply is short or not numeric")),
    }
}

fn uint(items: &[Value], i: usize) -> Result<u64, CheckError> {
    u64::try_from(int(items, i)?).map_err(|_| corrupt("the script replied with a negative number"))
}

fn text(items: &[Value], i: usize) -> String {
    match items.get(i) {
        Some(Value::BulkString(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::SimpleString(s)) => s.clone(),
        _ => String::new(),
    }
}

/// The script's own refusals: `{-1, code, message}`.
fn refusal(items: &[Value], op_name: &'static str) -> CheckError {
    match text(items, 1).as_str() {
        "horizon" => CheckError::Invalid {
            param: op_name,
            reason:
                "would move the key's state beyond the Redis store's horizon (2^52 ns or units)",
        },
        "corrupt" => CheckError::Store(StoreError::Corrupt(format!(
            "unreadable record ({})",
            text(items, 2)
        ))),
        other => corrupt(&format!("unknown refusal {other:?}")),
    }
}

/// A decision from five numbers starting at `at`.
fn decision(items: &[Value], at: usize, limit: u64) -> Result<Decision, CheckError> {
    Ok(Decision {
        allowed: uint(items, at)? == 1,
        limit,
        remaining: uint(items, at + 1)?,
        reset_after: Duration::from_nanos(uint(items, at + 2)?),
        retry_after: Duration::from_nanos(uint(items, at + 3)?),
        delay: Duration::from_nanos(uint(items, at + 4)?),
    })
}

/// The outcome of one operation.
pub(crate) fn outcome(value: Value, rule: &Rule, op: &Op<'_>) -> Result<Outcome, CheckError> {
    let items = items(value)?;
    let limit = rule.limit();
    let outcome = match int(&items, 0)? {
        -1 => return Err(refusal(&items, op.name())),
        1 => Outcome::Decision(decision(&items, 1, limit)?),
        2 => {
            let used = uint(&items, 1)?;
            Outcome::Usage(Usage {
                used,
                limit,
                remaining: limit.saturating_sub(used),
                blocked_for: Duration::from_nanos(uint(&items, 2)?),
                strikes: u32::try_from(uint(&items, 3)?)
                    .map_err(|_| corrupt("strikes above u32"))?,
                reset_after: Duration::from_nanos(uint(&items, 4)?),
            })
        }
        3 => Outcome::Released(uint(&items, 1)? == 1),
        4 => Outcome::Done,
        _ => return Err(corrupt("unknown reply kind")),
    };
    let expected = match op {
        Op::Check { .. } | Op::Penalty { .. } | Op::Reward { .. } | Op::Acquire { .. } => {
            matches!(outcome, Outcome::Decision(_))
        }
        Op::Inspect => matches!(outcome, Outcome::Usage(_)),
        Op::Release { .. } => matches!(outcome, Outcome::Released(_)),
        _ => matches!(outcome, Outcome::Done),
    };
    if expected {
        Ok(outcome)
    } else {
        Err(corrupt("reply of the wrong kind for the operation"))
    }
}

/// The decisions of several limits.
pub(crate) fn decisions(value: Value, rules: &[&Rule]) -> Result<Decisions, CheckError> {
    let items = items(value)?;
    match int(&items, 0)? {
        -1 => return Err(refusal(&items, "check")),
        5 => {}
        _ => return Err(corrupt("unknown reply kind")),
    }
    let each = rules
        .iter()
        .enumerate()
        .map(|(i, rule)| decision(&items, 2 + 5 * i, rule.limit()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Decisions {
        allowed: uint(&items, 1)? == 1,
        each,
    })
}
