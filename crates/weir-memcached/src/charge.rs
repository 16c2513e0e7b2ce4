//! The counters' one-round-trip check: the fast path of `apply.rs` for a fixed or sliding
//! window check of cost ≥ 1. It sends the `gets` of the key's names and the `incr` of the
//! current bucket in one pipelined write: memcached runs them in order, so the `gets` sees
//! every bucket as it was just before the `incr`, and the `incr` says what the current bucket
//! held when it landed. The decision is made on exactly that state:
//!
//! - it allows with that same `incr` (the usual case): done, in one round trip;
//! - it denies (over the limit, blocked): the `incr` is taken back with `decr`, and the
//!   denial returned (a lockout, which must be written, goes on to the full path);
//! - the bucket did not exist (its first hit in this window) or was deleted (an empty
//!   tombstone, on which `incr` fails): nothing was charged, and the full path goes on from
//!   this read (an `add`, or a `cas` over the tombstone).
//!
//! The cost, documented in the crate docs: a denied check is briefly counted, so a racing
//! check may be denied spuriously. Over-admission stays impossible: the decision is made on
//! the count the `incr` found.

use std::collections::HashMap;

use weir_core::{CheckError, Op, Outcome, Rule, StoreError};

use crate::apply::{decide, to_map};
use crate::client::{Command, Reply, Value};
use crate::exec::{self, Undo};
use crate::keys::Names;
use crate::layout::Layout;
use crate::plan::{Action, Write};
use crate::snapshot::Snapshot;
use crate::store::Inner;

/// How the fast path ended.
pub(crate) enum Charged {
    /// Decided; nothing is left to write.
    Decided(Outcome),
    /// Nothing charged: the full path goes on, from this read if there is one.
    Continue(Option<HashMap<String, Value>>),
}

/// Tries the one-round-trip check (see the module docs).
pub(crate) async fn check(
    inner: &Inner,
    layout: &Layout,
    names: &Names,
    rule: &Rule,
    cost: u64,
    to_read: &[String],
    now_ns: u64,
) -> Result<Charged, CheckError> {
    let (Layout::Counter(counter), Some(current)) = (layout, to_read.last()) else {
        return Ok(Charged::Continue(None));
    };
    let commands = [
        Command::Gets(to_read.to_vec()),
        Command::Incr {
            key: current.clone(),
            delta: cost,
        },
    ];
    let mut replies = inner.pool.run(&commands).await?.into_iter();
    let (Some(gets), Some(incr)) = (replies.next(), replies.next()) else {
        return Err(StoreError::Unavailable("memcached: a reply is missing".to_owned()).into());
    };
    let values = to_map(gets)?;
    let found = match incr {
        Reply::Number(n) => n.saturating_sub(cost),
        // No bucket yet, or a deleted one: nothing was counted; the full path adds it.
        Reply::NotFound | Reply::NonNumeric => return Ok(Charged::Continue(Some(values))),
        other => {
            return Err(StoreError::Unavailable(format!(
                "memcached: unexpected reply to incr: {other:?}"
            ))
            .into())
        }
    };
    let undo = || {
        vec![Undo::Decr {
            name: current.clone(),
            delta: cost,
        }]
    };
    if found < counter.offset() {
        // Only a value written by someone else can be below the offset: take the `incr` back
        // and decide on a fresh read.
        exec::undo(&inner.pool, undo()).await?;
        return Ok(Charged::Continue(None));
    }
    let op = Op::Check { cost };
    let snap = Snapshot::read(*layout, names, now_ns, &values)?.with_value(current, found);
    let (outcome, writes) = decide(&snap, rule, &op, now_ns)?;
    let charged = matches!(
        writes.as_slice(),
        [Write { name, action: Action::Incr { delta, .. } }] if name == current && *delta == cost
    );
    if charged {
        return Ok(Charged::Decided(outcome));
    }
    exec::undo(&inner.pool, undo()).await?;
    if writes.is_empty() {
        return Ok(Charged::Decided(outcome));
    }
    Ok(Charged::Continue(Some(values)))
}
