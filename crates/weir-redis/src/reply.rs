//! What comes back from a script: the reply arrays of `lua/step.lua` (`S.reply`) and
//! `lua/multi.lua`, and the fast path's decision as text (`lua/single_fast.lua`), read
//! into [`Outcome`] and [`Decisions`]. Anything else is a
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

/// A decision as the fast path writes it: `allowed remaining reset retry`, decimal (no
/// delay).
fn decision_text(text: &[u8], limit: u64) -> Result<Decision, CheckError> {
    let mut fields = text.split(|&b| b == b' ').map(|field| {
        std::str::from_utf8(field)
            .ok()
            .and_then(|f| f.parse::<u64>().ok())
            .ok_or_else(|| corrupt("the script's decision is not four numbers"))
    });
    let mut next = || {
        fields
            .next()
            .unwrap_or_else(|| Err(corrupt("the script's decision is short")))
    };
    let decision = Decision {
        allowed: next()? == 1,
        limit,
        remaining: next()?,
        reset_after: Duration::from_nanos(next()?),
        retry_after: Duration::from_nanos(next()?),
        delay: Duration::ZERO,
    };
    if fields.next().is_some() {
        return Err(corrupt("the script's decision is long"));
    }
    Ok(decision)
}

/// The outcome of one operation.
pub(crate) fn outcome(value: Value, rule: &Rule, op: &Op<'_>) -> Result<Outcome, CheckError> {
    let limit = rule.limit();
    let items = match value {
        Value::BulkString(text) => {
            let outcome = Outcome::Decision(decision_text(&text, limit)?);
            return expected(outcome, op);
        }
        value => items(value)?,
    };
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
    expected(outcome, op)
}

/// The outcome, if it is of the kind `op` answers with.
fn expected(outcome: Outcome, op: &Op<'_>) -> Result<Outcome, CheckError> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_as_text_is_four_numbers() {
        let d = decision_text(b"1 9 100000000 0", 10).ok();
        assert_eq!(
            d,
            Some(Decision {
                allowed: true,
                limit: 10,
                remaining: 9,
                reset_after: Duration::from_millis(100),
                retry_after: Duration::ZERO,
                delay: Duration::ZERO,
            })
        );
        for bad in [
            &b"1 9 100"[..],
            b"1 9 100 0 0",
            b"1 9 -1 0",
            b"",
            b"1 x 1 1",
        ] {
            assert!(decision_text(bad, 10).is_err(), "{bad:?}");
        }
    }
}
