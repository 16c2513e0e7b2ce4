//! Several limits in one decision (`check_all`), as close to all-or-nothing as memcached
//! allows. memcached has no multi-key transaction, so this is optimistic:
//!
//! 1. one `gets` reads every limit's names (one per server when the keys live on several,
//!    the servers concurrently: `context.rs`);
//! 2. every limit is decided on a copy of its record, exactly as the model does;
//! 3. if all allow, every limit's writes are sent in name order, each to its key's server;
//!    if one denies, only the denied limits' writes (their lockouts) are;
//! 4. a conflict on any write (a `cas` that finds the value changed, an `incr` that finds a
//!    count other than the one read) takes back every write already made (`decr` for an
//!    `incr`, the old value for a `cas` if the value is still ours) and starts again.
//!
//! What is atomic: each single write. What is not: the set (with one server or several:
//! memcached's multi-key `gets` is no snapshot either). Between the first and the last
//! write, another decision can see some limits charged and not others (it may be denied
//! where the all-or-nothing order would have allowed it, never the reverse for the counters);
//! and a rollback of a `cas` is skipped if someone else already changed that value, so a
//! conflicting concurrent writer keeps its own change and the rolled-back charge may remain
//! (over-counting, which denies more, never admits more).

use weir_core::step::check_now;
use weir_core::{step, CheckError, Decisions, Key, Op, Record, Rule};

use crate::context::{contention, Inner};
use crate::exec::{self, Ran};
use crate::keys::Names;
use crate::layout::Layout;
use crate::plan::plan;
use crate::snapshot::{names_to_read, Snapshot};

/// One distinct key of the limits.
struct Slot<'a> {
    key: &'a Key,
    layout: Layout,
    names: Names,
}

/// Checks `cost` against every limit, all-or-nothing as far as memcached allows.
pub(crate) async fn check_all(
    inner: &Inner,
    limits: &[(Key, Rule)],
    cost: u64,
    now_ns: u64,
) -> Result<Decisions, CheckError> {
    let op = Op::Check { cost };
    for (_, rule) in limits {
        step::apply(rule, &mut Record::fresh(rule, now_ns), &op, now_ns)?;
    }
    let mut slots: Vec<Slot<'_>> = Vec::new();
    let mut slot_of = Vec::with_capacity(limits.len());
    for (key, rule) in limits {
        let layout = Layout::of(rule);
        match slots.iter().position(|s| s.key == key) {
            Some(i) if slots.get(i).is_some_and(|s| s.layout == layout) => slot_of.push(i),
            Some(_) => {
                return Err(CheckError::Invalid {
                    param: "limits",
                    reason: "list one key twice only with rules stored alike",
                })
            }
            None => {
                slot_of.push(slots.len());
                slots.push(Slot {
                    key,
                    layout,
                    names: Names::new(&inner.prefix, key),
                });
            }
        }
    }
    let to_read: Vec<String> = slots
        .iter()
        .flat_map(|s| names_to_read(&s.layout, &s.names, now_ns))
        .collect();

    for attempt in 0..=inner.max_retries {
        let values = inner.read_all(to_read.clone()).await?;
        let mut snaps = Vec::with_capacity(slots.len());
        let mut before = Vec::with_capacity(slots.len());
        for (slot, (_, rule)) in slots.iter().zip(first_rules(limits, &slot_of, slots.len())) {
            let snap =
                Snapshot::read(slot.layout, &slot.names, now_ns, &values, inner.ttl_grace_s)?;
            before.push(snap.record(rule, now_ns)?);
            snaps.push(snap);
        }
        let mut work = before.clone();
        let mut each = Vec::with_capacity(limits.len());
        for ((_, rule), &i) in limits.iter().zip(&slot_of) {
            let record = work.get_mut(i).ok_or(CheckError::Invalid {
                param: "limits",
                reason: "internal slot mismatch",
            })?;
            each.push(check_now(rule, record, cost, now_ns)?);
        }
        let allowed = each.iter().all(|d| d.allowed);
        let mut writes = Vec::new();
        // As the model: record i is written iff its paired decision allows overall or denied.
        for (i, decision) in each.iter().enumerate().take(slots.len()) {
            if cost > 0 && (allowed || !decision.allowed) {
                if let (Some(snap), Some(b), Some(w)) = (snaps.get(i), before.get(i), work.get(i)) {
                    writes.extend(plan(snap, b, w, &op, now_ns)?);
                }
            }
        }
        writes.sort_by(|a, b| a.name.cmp(&b.name));
        match exec::run(inner, writes).await? {
            Ran::Done => return Ok(Decisions { allowed, each }),
            Ran::Conflict(done) | Ran::Raced { done, .. } => {
                exec::undo(inner, done).await?;
            }
        }
        inner.backoff.wait(attempt).await;
    }
    Err(contention(inner.max_retries))
}

/// The first rule listed for each slot (the one its record is read under).
fn first_rules<'a>(
    limits: &'a [(Key, Rule)],
    slot_of: &[usize],
    slots: usize,
) -> Vec<&'a (Key, Rule)> {
    (0..slots)
        .filter_map(|s| {
            slot_of
                .iter()
                .position(|&i| i == s)
                .and_then(|j| limits.get(j))
        })
        .collect()
}
