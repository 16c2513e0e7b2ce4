//! The one-round-trip check: the fast path of `apply.rs` for a check of cost ≥ 1.
//!
//! **Counters** (fixed or sliding window). It sends the `gets` of the key's names and the
//! `incr` of the current bucket in one pipelined write: memcached runs them in order, so the
//! `gets` sees every bucket as it was just before the `incr`, and the `incr` says what the
//! current bucket held when it landed. For a fixed window an `add` of a zero goes between
//! them, with the TTL the bucket's own `add` would have: a fixed window's missing counter and
//! a zero are the same to every decision (`plan.rs` never tells them apart, and writes a zero
//! where a count drops to nothing), so the first hit of a window is counted by the `incr`
//! too. The decision is made on exactly that state:
//!
//! - it allows with that same `incr` (the usual case): done, in one round trip;
//! - it denies (over the limit, blocked): the `incr` is taken back with `decr`, and the
//!   denial returned (a lockout, which must be written, goes on to the full path);
//! - the bucket did not exist (a sliding window's first hit in this bucket) or was deleted (an
//!   empty tombstone, on which `incr` fails): nothing was charged, and the full path goes on
//!   from this read (an `add`, or a `cas` over the tombstone). When the `add` made the zero,
//!   the read is stale and the full path reads again.
//!
//! The cost, documented in the crate docs: a denied check is briefly counted, so a racing
//! check may be denied spuriously. Over-admission stays impossible: the decision is made on
//! the count the `incr` found.
//!
//! **Records** (every other algorithm). Most checks of a large key space find no record, so
//! the check is decided first on a key that has none (the record the model would start),
//! and the `add` that stores its result is sent with the `gets`, in one write. The `add`
//! lands only if the key is absent when it runs, which is exactly the state that decision
//! was made on: done, in one round trip. If the key is there (live, or expired and still
//! held, or a tombstone), the `add` changes nothing and the full path goes on from the read
//! (a `cas`), in two round trips as before; if the read missed a record that the `add` then
//! found (someone else's, written in between), it reads again.

use std::collections::HashMap;

use weir_core::{CheckError, Op, Outcome, Rule, StoreError};

use crate::client::{Command, Reply, Value};
use crate::context::{to_map, Inner};
use crate::decide::decide;
use crate::exec::{self, Undo};
use crate::keys::Names;
use crate::layout::{Counter, CounterKind, Layout};
use crate::plan::{ttl_s, Action, Write};
use crate::snapshot::Snapshot;

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
    match layout {
        Layout::Counter(counter) => {
            check_counter(inner, counter, names, rule, cost, to_read, now_ns).await
        }
        Layout::Record => check_record(inner, names, rule, cost, to_read, now_ns).await,
    }
}

/// A record's check, the `add` sent with the `gets` (see the module docs).
async fn check_record(
    inner: &Inner,
    names: &Names,
    rule: &Rule,
    cost: u64,
    to_read: &[String],
    now_ns: u64,
) -> Result<Charged, CheckError> {
    let op = Op::Check { cost };
    let absent = Snapshot::read(
        Layout::Record,
        names,
        now_ns,
        &HashMap::new(),
        inner.ttl_grace_s,
    )?;
    let (outcome, writes) = decide(&absent, rule, &op, now_ns)?;
    let [Write {
        name,
        action:
            Action::Store {
                data,
                ttl_s,
                unique: None,
                ..
            },
    }] = writes.as_slice()
    else {
        return Ok(Charged::Continue(None));
    };
    let commands = [
        Command::Gets(to_read.to_vec()),
        Command::Add {
            key: name.clone(),
            ttl_s: *ttl_s,
            data: data.clone(),
        },
    ];
    let mut replies = inner.pool(names)?.run(&commands).await?.into_iter();
    let (Some(gets), Some(add)) = (replies.next(), replies.next()) else {
        return Err(missing().into());
    };
    let values = to_map(gets)?;
    match add {
        // Absent when the `add` landed: decided on exactly that.
        Reply::Stored => Ok(Charged::Decided(outcome)),
        // Present: the full path goes on from the read, unless the read missed it (added by
        // someone else in between), when it reads again.
        Reply::NotStored if values.contains_key(name) => Ok(Charged::Continue(Some(values))),
        Reply::NotStored => Ok(Charged::Continue(None)),
        other => Err(unexpected("add", &other).into()),
    }
}

/// A counter's check: `gets` and `incr` (after an `add` of a zero for a fixed window).
async fn check_counter(
    inner: &Inner,
    counter: &Counter,
    names: &Names,
    rule: &Rule,
    cost: u64,
    to_read: &[String],
    now_ns: u64,
) -> Result<Charged, CheckError> {
    let Some(current) = to_read.last() else {
        return Ok(Charged::Continue(None));
    };
    // A fixed window's missing counter and a zero are the same (`plan.rs`): creating the
    // zero first lets the `incr` count a window's first hit too.
    let zero = match (counter.kind, counter.starts(now_ns).last()) {
        (CounterKind::Fixed, Some(start)) => Some(Command::Add {
            key: current.clone(),
            ttl_s: ttl_s(
                start.saturating_add(counter.window_ns),
                now_ns,
                inner.ttl_grace_s,
            ),
            data: b"0".to_vec(),
        }),
        _ => None,
    };
    let sent_zero = zero.is_some();
    let mut commands = Vec::with_capacity(3);
    commands.push(Command::Gets(to_read.to_vec()));
    commands.extend(zero);
    commands.push(Command::Incr {
        key: current.clone(),
        delta: cost,
    });
    let mut replies = inner.pool(names)?.run(&commands).await?.into_iter();
    let gets = replies.next().ok_or_else(missing)?;
    // Whether the `add` made the bucket, which the `gets` then did not see.
    let added = if sent_zero {
        match replies.next().ok_or_else(missing)? {
            Reply::Stored => true,
            Reply::NotStored => false,
            other => return Err(unexpected("add", &other).into()),
        }
    } else {
        false
    };
    let incr = replies.next().ok_or_else(missing)?;
    let values = to_map(gets)?;
    // What the full path goes on from: this read, unless it is stale (the `add` made a zero).
    let continued = |values| Charged::Continue((!added).then_some(values));
    let found = match incr {
        Reply::Number(n) => n.saturating_sub(cost),
        // No bucket yet, or a deleted one: nothing was counted; the full path adds it.
        Reply::NotFound | Reply::NonNumeric => return Ok(continued(values)),
        other => return Err(unexpected("incr", &other).into()),
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
        exec::undo(inner, undo()).await?;
        return Ok(Charged::Continue(None));
    }
    let op = Op::Check { cost };
    let snap = Snapshot::read(
        Layout::Counter(*counter),
        names,
        now_ns,
        &values,
        inner.ttl_grace_s,
    )?
    .with_value(current, found);
    let (outcome, writes) = decide(&snap, rule, &op, now_ns)?;
    let charged = matches!(
        writes.as_slice(),
        [Write { name, action: Action::Incr { delta, .. } }] if name == current && *delta == cost
    );
    if charged {
        return Ok(Charged::Decided(outcome));
    }
    exec::undo(inner, undo()).await?;
    if writes.is_empty() {
        return Ok(Charged::Decided(outcome));
    }
    Ok(continued(values))
}

fn missing() -> StoreError {
    StoreError::Unavailable("memcached: a reply is missing".to_owned())
}

fn unexpected(what: &str, reply: &Reply) -> StoreError {
    StoreError::Unavailable(format!("memcached: unexpected reply to {what}: {reply:?}"))
}
