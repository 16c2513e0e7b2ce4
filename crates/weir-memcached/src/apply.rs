//! One operation on one key: read, decide with `step::apply`, write, and on a conflict decide
//! again. The loop every [`Store::apply`](weir_core::Store::apply) call of this store runs.
//!
//! 1. Validate on a fresh record: an operation that can never succeed never touches memcached.
//!    A check first tries the one-round-trip check (`charge.rs`).
//! 2. `gets` the key's names in one round trip and rebuild its record (`snapshot.rs`).
//! 3. Run the pure step on a copy, and plan the writes (`plan.rs`).
//! 4. Send them (`exec.rs`). A `cas`/`add` conflict undoes what was written and starts again
//!    after a jittered backoff, at most `max_retries` times. A counter's `incr` never
//!    conflicts: it returns what it found, and the decision is made again on that (the
//!    `incr` is where the decision takes effect). If that decision is not the same `incr`,
//!    the `incr` is taken back (a denial) or the whole operation starts again.

use weir_core::{step, CheckError, Key, Op, Outcome, Record, Rule};

use crate::charge::{self, Charged};
use crate::context::{contention, read, Inner};
use crate::decide::decide;
use crate::exec::{self, Ran, Undo};
use crate::keys::Names;
use crate::layout::Layout;
use crate::plan::{Action, Write};
use crate::snapshot::{names_to_read, Snapshot};

/// Applies `op` to `key` under `rule` at `now_ns`.
pub(crate) async fn apply(
    inner: &Inner,
    key: &Key,
    rule: &Rule,
    op: Op<'_>,
    now_ns: u64,
) -> Result<Outcome, CheckError> {
    step::apply(rule, &mut Record::fresh(rule, now_ns), &op, now_ns)?;
    let layout = Layout::of(rule);
    let names = Names::new(&inner.prefix, key);
    let to_read = names_to_read(&layout, &names, now_ns);
    let mut prefetched = None;
    if let Op::Check { cost: cost @ 1.. } = op {
        match charge::check(inner, &layout, &names, rule, cost, &to_read, now_ns).await? {
            Charged::Decided(outcome) => return Ok(outcome),
            Charged::Continue(values) => prefetched = values,
        }
    }
    for attempt in 0..=inner.max_retries {
        let values = match prefetched.take() {
            Some(values) => values,
            None => read(inner.pool(&names)?, to_read.clone()).await?,
        };
        let snap = Snapshot::read(layout, &names, now_ns, &values, inner.ttl_grace_s)?;
        let (outcome, writes) = decide(&snap, rule, &op, now_ns)?;
        match exec::run(inner, writes).await? {
            Ran::Done => return Ok(outcome),
            Ran::Conflict(done) => exec::undo(inner, done).await?,
            Ran::Raced {
                name,
                delta,
                found,
                done,
            } => {
                if let Some(outcome) =
                    decide_again(inner, &snap, rule, &op, now_ns, &name, delta, found, done).await?
                {
                    return Ok(outcome);
                }
            }
        }
        inner.backoff.wait(attempt).await;
    }
    Err(contention(inner.max_retries))
}

/// An `incr` on `name` found `found` instead of what was read. Decides again on the state it
/// found: the same `incr` means the decision stands as decided now; no write at all (a
/// denial) means the `incr` is taken back and the denial returned; anything else is taken
/// back and retried (`None`).
#[allow(clippy::too_many_arguments)]
async fn decide_again(
    inner: &Inner,
    snap: &Snapshot,
    rule: &Rule,
    op: &Op<'_>,
    now_ns: u64,
    name: &str,
    delta: u64,
    found: u64,
    done: Vec<Undo>,
) -> Result<Option<Outcome>, CheckError> {
    let single = done.len() == 1;
    let again = snap.with_value(name, found);
    let (outcome, writes) = decide(&again, rule, op, now_ns)?;
    let same = matches!(
        writes.as_slice(),
        [Write { name: n, action: Action::Incr { delta: d, .. } }] if n == name && *d == delta
    );
    if same && single {
        return Ok(Some(outcome));
    }
    exec::undo(inner, done).await?;
    Ok(writes.is_empty().then_some(outcome))
}
