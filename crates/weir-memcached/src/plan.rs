//! The writes that turn what was read (a [`Snapshot`]) into what `step::apply` decided (the
//! new [`Record`]): the fourth step of a decision. Pure; `exec.rs` sends them.
//!
//! - Record layout: `cas` the new value (`add` for a new key), or a tombstone (an empty
//!   value, the CAS-checked delete the text protocol lacks) when the record is no longer
//!   live. Nothing is created for an operation that adds no usage.
//! - Counters: per bucket, `incr` by the growth (atomic, no CAS needed), `add` for a new
//!   bucket, `cas` when a bucket shrinks or disappears (an empty tombstone: reward, reset, a
//!   merge); and the
//!   guard is written to the record name only when it changed.
//!
//! Writes are ordered newest bucket first, then the guard: a racing `incr` can only meet the
//! newest bucket, so a conflict is found before anything older has been touched.

use std::collections::BTreeMap;

use weir_core::{time::SECOND_NS, Guard, Op, Record, State, StoreError};

use crate::codec;
use crate::layout::{Counter, CounterKind, Layout};
use crate::snapshot::{live_guard, Snapshot};

/// memcached reads a TTL above 30 days as an absolute Unix time. This store never sends
/// one: the process clock may be a test's manual clock, so such TTLs become 0 (no expiry;
/// the record's own `expires_ns` decides, and memcached's LRU reclaims the memory).
const MAX_RELATIVE_TTL_S: u64 = 30 * 24 * 3600;
/// How long a tombstone stays (it only has to outlive the reads racing with it).
const TOMBSTONE_TTL_S: u32 = 2;

/// One write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Write {
    pub name: String,
    pub action: Action,
}

/// What to do to one name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// `incr` by `delta`; `expect` is the result if nobody else wrote in between.
    Incr { delta: u64, expect: u64 },
    /// `cas` (with the unique of the read) or `add` (`unique: None`). `previous` is what was
    /// read (or the value that means "nothing" there), to undo it.
    Store {
        data: Vec<u8>,
        ttl_s: u32,
        unique: Option<u64>,
        previous: Vec<u8>,
        previous_ttl_s: u32,
    },
}

/// What a record name holds when there is no record: an empty tombstone.
const NO_RECORD: &[u8] = b"";
/// What a counter holds when there is no bucket: an empty tombstone too. `incr` fails on it
/// (non-numeric), so a racing `incr` can never count from a deleted bucket.
const NO_COUNT: &[u8] = b"";

/// The TTL for a value that must last until `until_ns`: whole seconds rounded up, plus one
/// for memcached's own second-granular clock, so memcached never forgets it early, plus the
/// store's `grace_s`. Late is harmless: the record's own expiry decides (an expired record
/// is fresh anyway).
pub(crate) fn ttl_s(until_ns: u64, now_ns: u64, grace_s: u32) -> u32 {
    let secs = until_ns.saturating_sub(now_ns).div_ceil(SECOND_NS) + 1 + u64::from(grace_s);
    if secs > MAX_RELATIVE_TTL_S {
        0
    } else {
        u32::try_from(secs).unwrap_or(0)
    }
}

/// A `cas` over what was `found` (an `add` if nothing was), undone by writing back what was
/// found (`absent` if nothing was) with `previous_ttl_s`.
fn store(
    name: &str,
    found: &Option<(Vec<u8>, u64)>,
    absent: &[u8],
    data: Vec<u8>,
    (ttl_s, previous_ttl_s): (u32, u32),
) -> Write {
    Write {
        name: name.to_owned(),
        action: Action::Store {
            data,
            ttl_s,
            unique: found.as_ref().map(|(_, u)| *u),
            previous: found
                .as_ref()
                .map_or_else(|| absent.to_vec(), |(d, _)| d.clone()),
            previous_ttl_s,
        },
    }
}

/// The TTL the stored record needed, to put it back.
fn stored_ttl_s(snap: &Snapshot, now_ns: u64) -> u32 {
    snap.stored.as_ref().map_or(TOMBSTONE_TTL_S, |s| {
        ttl_s(s.expires_ns, now_ns, snap.ttl_grace_s)
    })
}

/// The writes that store `after`, the record `step::apply` left from `before` (the record
/// read from `snap`).
pub(crate) fn plan(
    snap: &Snapshot,
    before: &Record,
    after: &Record,
    op: &Op<'_>,
    now_ns: u64,
) -> Result<Vec<Write>, StoreError> {
    match &snap.layout {
        Layout::Record => Ok(plan_record(snap, before, after, op, now_ns)?
            .into_iter()
            .collect()),
        Layout::Counter(counter) => plan_counter(snap, counter, after, now_ns),
    }
}

fn plan_record(
    snap: &Snapshot,
    before: &Record,
    after: &Record,
    op: &Op<'_>,
    now_ns: u64,
) -> Result<Option<Write>, StoreError> {
    let name = &snap.record_name;
    let found = &snap.record_found;
    let keep = op.keeps(before.is_live(now_ns), after, now_ns);
    let previous_ttl = stored_ttl_s(snap, now_ns);
    let ttl = ttl_s(after.expires_ns, now_ns, snap.ttl_grace_s);
    Ok(if snap.held() {
        if !keep {
            let ttls = (TOMBSTONE_TTL_S, previous_ttl);
            Some(store(name, found, NO_RECORD, Vec::new(), ttls))
        } else if after != before {
            let data = codec::encode(after, true)?;
            Some(store(name, found, NO_RECORD, data, (ttl, previous_ttl)))
        } else {
            None
        }
    } else if keep {
        let data = codec::encode(after, true)?;
        Some(store(name, found, NO_RECORD, data, (ttl, previous_ttl)))
    } else {
        None
    })
}

/// One bucket's count before and after (`None`: no bucket).
#[derive(Default)]
struct Change {
    /// Where it is in the snapshot, if it was read.
    read: Option<usize>,
    before: Option<u64>,
    after: Option<u64>,
}

fn plan_counter(
    snap: &Snapshot,
    counter: &Counter,
    after: &Record,
    now_ns: u64,
) -> Result<Vec<Write>, StoreError> {
    let fixed = counter.kind == CounterKind::Fixed;
    let mut changes: BTreeMap<u64, Change> = BTreeMap::new();
    for (i, (start, count)) in snap.counts(counter).into_iter().enumerate() {
        let change = changes.entry(start).or_default();
        change.read = Some(i);
        change.before = count;
    }
    for (start, count) in counter_after(counter, after, now_ns) {
        changes.entry(start).or_default().after = Some(count);
    }
    let mut writes = Vec::new();
    for (start, change) in changes.into_iter().rev() {
        let (mut before, mut now) = (change.before, change.after);
        if fixed {
            // A fixed window's missing counter and a zero are the same.
            before = Some(before.unwrap_or(0));
            now = Some(now.unwrap_or(0));
        }
        if before == now {
            continue;
        }
        let bucket = change.read.and_then(|i| snap.buckets.get(i));
        let name = bucket.map_or_else(|| counter.name(&snap.names, start), |b| b.name.clone());
        let found = bucket.and_then(|b| b.found.clone());
        let incr = match (before, now, bucket.and_then(|b| b.value)) {
            // Grows, and the counter exists: `incr`, unless it would overflow.
            (Some(b), Some(a), Some(value)) if a > b && found.is_some() => {
                value.checked_add(a - b).map(|expect| Action::Incr {
                    delta: a - b,
                    expect,
                })
            }
            _ => None,
        };
        writes.push(match incr {
            Some(action) => Write { name, action },
            None => {
                // Appears, shrinks, disappears (tombstone), or would overflow.
                let ttl = ttl_s(
                    start.saturating_add(counter.window_ns),
                    now_ns,
                    snap.ttl_grace_s,
                );
                let stored = now.map_or_else(Vec::new, |c| {
                    c.saturating_add(counter.offset()).to_string().into_bytes()
                });
                store(&name, &found, NO_COUNT, stored, (ttl, ttl))
            }
        });
    }
    if let Some(write) = plan_guard(snap, after, now_ns)? {
        writes.push(write);
    }
    Ok(writes)
}

/// The live buckets of the state `step::apply` left.
fn counter_after(counter: &Counter, after: &Record, now_ns: u64) -> Vec<(u64, u64)> {
    match &after.state {
        State::FixedWindow(s) => vec![(s.window_start_ns, s.count)],
        State::Sliding(s) => s
            .buckets
            .iter()
            .copied()
            .filter(|(start, _)| start.saturating_add(counter.window_ns) > now_ns)
            .collect(),
        _ => Vec::new(),
    }
}

fn plan_guard(snap: &Snapshot, after: &Record, now_ns: u64) -> Result<Option<Write>, StoreError> {
    let before = live_guard(snap.stored_guard(), now_ns);
    let now = live_guard(after.guard.as_deref(), now_ns);
    // Another algorithm's state (the rule changed): the step started the key fresh, so it
    // goes, as in the model, lest a change back find it again.
    let foreign = snap.stored.as_ref().is_some_and(|s| s.state.is_some());
    if before == now && !foreign {
        return Ok(None);
    }
    let found = &snap.record_found;
    let previous_ttl = stored_ttl_s(snap, now_ns);
    Ok(Some(match now {
        None => store(
            &snap.record_name,
            found,
            NO_RECORD,
            Vec::new(),
            (TOMBSTONE_TTL_S, previous_ttl),
        ),
        Some(guard) => {
            let until_ns = guard_until(&guard);
            let record = Record {
                expires_ns: until_ns,
                state: after.state.clone(),
                guard: Some(Box::new(guard)),
            };
            let data = codec::encode(&record, false)?;
            let ttl = ttl_s(until_ns, now_ns, snap.ttl_grace_s);
            store(
                &snap.record_name,
                found,
                NO_RECORD,
                data,
                (ttl, previous_ttl),
            )
        }
    }))
}

fn guard_until(guard: &Guard) -> u64 {
    guard.blocked_until_ns.max(guard.strikes_expire_ns)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use weir_core::{step, Key, Lockout, Rule};

    use super::*;
    use crate::client::Value;
    use crate::keys::Names;

    const NOW: u64 = 10_260;

    fn names() -> Names {
        Names::new("t:", &Key::new("k").unwrap())
    }

    /// The plan for `op` on a key whose names hold `values` (name, data, unique).
    fn plan_for(rule: &Rule, op: Op<'_>, values: &[(String, &[u8], u64)]) -> Vec<Write> {
        let values: HashMap<String, Value> = values
            .iter()
            .map(|(name, data, unique)| {
                let value = Value {
                    key: name.clone(),
                    data: data.to_vec(),
                    unique: *unique,
                };
                (name.clone(), value)
            })
            .collect();
        let snap = Snapshot::read(Layout::of(rule), &names(), NOW, &values, 0).unwrap();
        let before = snap.record(rule, NOW).unwrap();
        let mut after = before.clone();
        step::apply(rule, &mut after, &op, NOW).unwrap();
        plan(&snap, &before, &after, &op, NOW).unwrap()
    }

    fn sliding() -> Rule {
        Rule::sliding_window(5, Duration::from_nanos(1_000), Duration::from_nanos(250)).unwrap()
    }

    fn cas(name: String, data: &[u8], unique: u64, previous: &[u8]) -> Write {
        Write {
            name,
            action: Action::Store {
                data: data.to_vec(),
                ttl_s: 2,
                unique: Some(unique),
                previous: previous.to_vec(),
                previous_ttl_s: 2,
            },
        }
    }

    #[test]
    fn a_check_on_a_live_bucket_is_one_incr() {
        let current = names().sliding(10_250);
        let got = plan_for(
            &sliding(),
            Op::Check { cost: 2 },
            &[(current.clone(), &b"2"[..], 7)],
        );
        let incr = Action::Incr {
            delta: 2,
            expect: 4,
        };
        assert_eq!(
            got,
            [Write {
                name: current,
                action: incr
            }]
        );
    }

    #[test]
    fn a_zero_penalty_writes_nothing() {
        // A zero penalty adds no bucket (weir-core's sliding window makes it a no-op).
        let got = plan_for(&sliding(), Op::Penalty { n: 0 }, &[]);
        assert!(got.is_empty(), "{got:?}");
    }

    #[test]
    fn a_reward_that_empties_buckets_tombstones_them_newest_first() {
        let (old, current) = (names().sliding(9_750), names().sliding(10_250));
        let values = [(old.clone(), &b"3"[..], 1), (current.clone(), &b"2"[..], 2)];
        let got = plan_for(&sliding(), Op::Reward { n: 5 }, &values);
        assert_eq!(got, [cas(current, b"", 2, b"2"), cas(old, b"", 1, b"3")]);
    }

    #[test]
    fn a_lockout_writes_the_guard_and_leaves_the_count() {
        let rule = Rule::fixed_window(2, Duration::from_nanos(1_000))
            .unwrap()
            .with_lockout(Lockout::new(Duration::from_nanos(500)).unwrap());
        let window = names().fixed(10_000);
        let got = plan_for(&rule, Op::Check { cost: 1 }, &[(window, &b"2"[..], 3)]);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].name, names().record());
        assert!(matches!(got[0].action, Action::Store { unique: None, .. }));
    }

    #[test]
    fn a_record_that_is_no_longer_live_becomes_a_tombstone() {
        let rule = Rule::gcra(1, Duration::from_nanos(1_000), 1).unwrap();
        let live = Record {
            expires_ns: NOW + 500,
            state: State::Gcra(weir_core::algorithm::GcraState { tat_ns: NOW + 500 }),
            guard: None,
        };
        let stored = codec::encode(&live, true).unwrap();
        let got = plan_for(&rule, Op::Reset, &[(names().record(), &stored, 9)]);
        assert_eq!(got, [cas(names().record(), b"", 9, &stored)]);
    }

    #[test]
    fn ttls_round_up_and_never_go_absolute() {
        assert_eq!(ttl_s(0, 5, 0), 1);
        assert_eq!(ttl_s(SECOND_NS, 0, 0), 2);
        assert_eq!(ttl_s(SECOND_NS + 1, 0, 0), 3);
        // The grace adds whole seconds.
        assert_eq!(ttl_s(SECOND_NS, 0, 600), 602);
        assert_eq!(ttl_s(MAX_RELATIVE_TTL_S * SECOND_NS, 0, 0), 0);
        assert_eq!(ttl_s(u64::MAX, 0, 0), 0);
    }
}
