//! One record of a snapshot as bytes and back: the scope, key, expiry, guard and state
//! (a tag, then the state's integers), and the [`Reader`] that refuses a short read. A
//! record that parses but breaks an algorithm's invariant is dropped alone; bytes that do
//! not parse refuse the whole snapshot (`snapshot.rs` frames the records and says the
//! format). Off the path of a decision.

use std::collections::VecDeque;

use crate::algorithm::{
    ConcurrencyState, FixedWindowState, GcraState, LeakyBucketState, LeakyQueueState, LeaseEntry,
    SlidingState, TokenBucketState, Warm, WeightedWindowState,
};
use crate::key::Key;
use crate::state::{Guard, Record, State};

use super::{SnapshotError, MAX_HOLDER, MAX_LEASES, MAX_SLIDING};

/// One saved record: the scope (rule) and key it belongs to, and the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SavedRecord {
    /// The rule's scope ([`Rule::scope`](crate::Rule::scope)).
    pub scope: u64,
    /// The key.
    pub key: Key,
    /// The record, times absolute.
    pub record: Record,
}

/// Whether this format can hold `state`.
pub(super) fn encodable(state: &State) -> bool {
    state_tag(state).is_some()
}

#[allow(unreachable_patterns)] // states added later are not saved until the format has them
fn state_tag(state: &State) -> Option<u8> {
    Some(match state {
        State::FixedWindow(_) => 1,
        State::Sliding(_) => 2,
        State::Weighted(_) => 3,
        State::TokenBucket(_) => 4,
        State::LeakyBucket(_) => 5,
        State::Gcra(_) => 6,
        State::LeakyQueue(_) => 7,
        State::Concurrency(_) => 8,
        State::GcraWarm(_) => 9,
        State::TokenBucketWarm(_) => 10,
        _ => return None,
    })
}

fn put_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(&n.to_le_bytes());
}

/// A count of items, as a u32 (`fits` bounds every count well below).
fn put_len(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

/// Appends one record; `false` (nothing written) for a state the format does not hold or
/// one too large for its length fields.
#[allow(unreachable_patterns)]
pub(super) fn encode_record(out: &mut Vec<u8>, saved: &SavedRecord) -> bool {
    let Some(tag) = state_tag(&saved.record.state) else {
        return false;
    };
    let key = saved.key.as_bytes();
    let (Ok(key_len), true) = (u16::try_from(key.len()), fits(&saved.record.state)) else {
        return false;
    };
    put_u64(out, saved.scope);
    out.extend_from_slice(&key_len.to_le_bytes());
    out.extend_from_slice(key);
    put_u64(out, saved.record.expires_ns);
    match saved.record.guard.as_deref() {
        Some(g) => {
            out.push(1);
            put_u64(out, g.blocked_until_ns);
            out.extend_from_slice(&g.strikes.to_le_bytes());
            put_u64(out, g.strikes_expire_ns);
        }
        None => out.push(0),
    }
    out.push(tag);
    match &saved.record.state {
        State::FixedWindow(s) => {
            put_u64(out, s.window_start_ns);
            put_u64(out, s.count);
        }
        State::Sliding(s) => {
            put_u64(out, s.total);
            put_len(out, s.buckets.len());
            for &(start, count) in &s.buckets {
                put_u64(out, start);
                put_u64(out, count);
            }
        }
        State::Weighted(s) => {
            put_u64(out, s.window_start_ns);
            put_u64(out, s.previous);
            put_u64(out, s.current);
        }
        State::TokenBucket(s) => {
            put_u64(out, s.tokens);
            put_u64(out, s.last_ns);
        }
        State::LeakyBucket(s) => {
            put_u64(out, s.level);
            put_u64(out, s.last_ns);
        }
        State::Gcra(s) => put_u64(out, s.tat_ns),
        State::LeakyQueue(s) => put_u64(out, s.next_free_ns),
        State::Concurrency(s) => {
            put_len(out, s.leases.len());
            for lease in &s.leases {
                let holder_len = u16::try_from(lease.holder.len()).unwrap_or(u16::MAX);
                out.extend_from_slice(&holder_len.to_le_bytes());
                out.extend_from_slice(lease.holder.as_bytes());
                out.extend_from_slice(&lease.holds.to_le_bytes());
                put_u64(out, lease.expires_ns);
            }
        }
        State::GcraWarm(s) => {
            put_u64(out, s.state.tat_ns);
            put_u64(out, s.warm_ns);
        }
        State::TokenBucketWarm(s) => {
            put_u64(out, s.state.tokens);
            put_u64(out, s.state.last_ns);
            put_u64(out, s.warm_ns);
        }
        _ => {}
    }
    true
}

/// Whether the state's variable parts fit the format's length fields and bounds.
fn fits(state: &State) -> bool {
    match state {
        State::Sliding(s) => s.buckets.len() <= MAX_SLIDING,
        State::Concurrency(s) => {
            s.leases.len() <= MAX_LEASES && s.leases.iter().all(|l| l.holder.len() <= MAX_HOLDER)
        }
        _ => true,
    }
}

/// A record that parsed: `Ok(Ok(record))`, or `Ok(Err(why))` when it is not valid (it is
/// dropped alone); `Err` when the bytes do not parse (the whole snapshot is refused).
pub(super) fn decode_record(
    r: &mut Reader<'_>,
) -> Result<Result<SavedRecord, String>, SnapshotError> {
    let scope = r.u64()?;
    let key_len = usize::from(r.u16()?);
    let key = r.bytes(key_len)?;
    let expires_ns = r.u64()?;
    let guard = match r.u8()? {
        0 => None,
        1 => Some(Box::new(Guard {
            blocked_until_ns: r.u64()?,
            strikes: r.u32()?,
            strikes_expire_ns: r.u64()?,
        })),
        other => return Err(malformed(format!("guard marker {other}"))),
    };
    let state = match r.u8()? {
        1 => State::FixedWindow(FixedWindowState {
            window_start_ns: r.u64()?,
            count: r.u64()?,
        }),
        2 => {
            let total = r.u64()?;
            let n = r.len(MAX_SLIDING, "sliding entries")?;
            let mut buckets = VecDeque::with_capacity(n);
            for _ in 0..n {
                buckets.push_back((r.u64()?, r.u64()?));
            }
            State::Sliding(Box::new(SlidingState { buckets, total }))
        }
        3 => State::Weighted(Box::new(WeightedWindowState {
            window_start_ns: r.u64()?,
            previous: r.u64()?,
            current: r.u64()?,
        })),
        4 => State::TokenBucket(TokenBucketState {
            tokens: r.u64()?,
            last_ns: r.u64()?,
        }),
        5 => State::LeakyBucket(LeakyBucketState {
            level: r.u64()?,
            last_ns: r.u64()?,
        }),
        6 => State::Gcra(GcraState { tat_ns: r.u64()? }),
        7 => State::LeakyQueue(LeakyQueueState {
            next_free_ns: r.u64()?,
        }),
        8 => {
            let n = r.len(MAX_LEASES, "leases")?;
            let mut leases = Vec::with_capacity(n);
            for _ in 0..n {
                let holder_len = usize::from(r.u16()?);
                let holder = std::str::from_utf8(r.bytes(holder_len)?);
                // Not UTF-8: an empty holder, which `valid_state` refuses.
                leases.push(LeaseEntry {
                    holder: holder.unwrap_or_default().into(),
                    holds: r.u32()?,
                    expires_ns: r.u64()?,
                });
            }
            State::Concurrency(Box::new(ConcurrencyState { leases }))
        }
        9 => State::GcraWarm(Warm {
            state: GcraState { tat_ns: r.u64()? },
            warm_ns: r.u64()?,
        }),
        10 => State::TokenBucketWarm(Box::new(Warm {
            state: TokenBucketState {
                tokens: r.u64()?,
                last_ns: r.u64()?,
            },
            warm_ns: r.u64()?,
        })),
        other => return Err(malformed(format!("state tag {other}"))),
    };
    let key = match Key::new(key) {
        Ok(key) => key,
        Err(e) => return Ok(Err(format!("key: {e}"))),
    };
    if let Err(why) = valid_state(&state) {
        return Ok(Err(format!("{key:?}: {why}")));
    }
    Ok(Ok(SavedRecord {
        scope,
        key,
        record: Record {
            expires_ns,
            state,
            guard,
        },
    }))
}

/// The invariants the algorithms keep on the states whose shape allows breaking them.
fn valid_state(state: &State) -> Result<(), &'static str> {
    match state {
        State::Sliding(s) => {
            let sorted = s
                .buckets
                .iter()
                .zip(s.buckets.iter().skip(1))
                .all(|(a, b)| a.0 < b.0);
            let sum = s.buckets.iter().try_fold(0u64, |sum, &(_, count)| {
                (count > 0).then(|| sum.checked_add(count))?
            });
            if !sorted || sum != Some(s.total) {
                return Err("a sliding log out of order, or whose total is not its sum");
            }
        }
        State::Concurrency(s) => {
            let ok = s
                .leases
                .iter()
                .all(|l| !l.holder.is_empty() && l.holder.len() <= MAX_HOLDER && l.holds > 0);
            if !ok {
                return Err("a lease without holder or holds");
            }
        }
        _ => {}
    }
    Ok(())
}

fn malformed(what: String) -> SnapshotError {
    SnapshotError::Malformed(what)
}

/// Reads integers and byte runs off the front of a slice; running out is malformed.
pub(super) struct Reader<'a> {
    pub(super) rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(super) fn new(rest: &'a [u8]) -> Self {
        Self { rest }
    }

    fn bytes(&mut self, n: usize) -> Result<&'a [u8], SnapshotError> {
        if self.rest.len() < n {
            return Err(malformed(format!(
                "{n} bytes wanted, {} left",
                self.rest.len()
            )));
        }
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], SnapshotError> {
        let bytes = self.bytes(N)?;
        bytes
            .try_into()
            .map_err(|_| malformed("a short read".to_string()))
    }

    fn u8(&mut self) -> Result<u8, SnapshotError> {
        Ok(self.array::<1>()?[0])
    }

    fn u16(&mut self) -> Result<u16, SnapshotError> {
        self.array().map(u16::from_le_bytes)
    }

    pub(super) fn u32(&mut self) -> Result<u32, SnapshotError> {
        self.array().map(u32::from_le_bytes)
    }

    pub(super) fn u64(&mut self) -> Result<u64, SnapshotError> {
        self.array().map(u64::from_le_bytes)
    }

    /// A u32 count of at most `max` items of `what`.
    fn len(&mut self, max: usize, what: &str) -> Result<usize, SnapshotError> {
        let n = self.u32()?;
        usize::try_from(n)
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| malformed(format!("{n} {what}, more than {max}")))
    }
}
