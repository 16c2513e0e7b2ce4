//! The third step of a decision: the pure step on the record a snapshot rebuilds, and the
//! writes that would store its result. No I/O. Shared by the full path (`apply.rs`) and the
//! one-round-trip check (`charge.rs`); `check_all.rs` decides several limits on its own.

use weir_core::{step, CheckError, Op, Outcome, Rule};

use crate::plan::{plan, Write};
use crate::snapshot::Snapshot;

/// The step on the snapshot's record, and the writes that store its result.
pub(crate) fn decide(
    snap: &Snapshot,
    rule: &Rule,
    op: &Op<'_>,
    now_ns: u64,
) -> Result<(Outcome, Vec<Write>), CheckError> {
    let before = snap.record(rule, now_ns)?;
    let mut after = before.clone();
    let outcome = step::apply(rule, &mut after, op, now_ns)?;
    let writes = plan(snap, &before, &after, op, now_ns)?;
    Ok((outcome, writes))
}
