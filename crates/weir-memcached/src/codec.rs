//! The stored form of a [`Record`]: a compact, versioned binary encoding (a version byte,
//! then LEB128 integers and tagged fields). Used for every algorithm kept as one record
//! (read with `gets`, written with `cas`/`add`) and for the counters' guard. It decides
//! nothing; an unreadable value is [`StoreError::Corrupt`], never a guess.
//!
//! Layout (version 1): `01 · expires · guard · state`, where `guard` is `00` or
//! `01 · blocked_until · strikes · strikes_expire`, and `state` is a tag byte and the state's
//! integers (tag `00`: no state, the counters' guard-only record; a warm-up's state, tags
//! `09` and `0a`, is the plain state's integers then the ramp position). An empty value is a
//! tombstone: the record was deleted (see `plan.rs`).

use std::collections::VecDeque;

use weir_core::algorithm::{
    ConcurrencyState, FixedWindowState, GcraState, LeakyBucketState, LeakyQueueState, LeaseEntry,
    SlidingState, TokenBucketState, Warm, WeightedWindowState,
};
use weir_core::{Guard, Record, Rule, State, StoreError};

const VERSION: u8 = 1;

/// A decoded value: the record as stored, with no state for a guard-only record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stored {
    pub expires_ns: u64,
    pub state: Option<State>,
    pub guard: Option<Guard>,
}

impl Stored {
    /// The record for `rule`: a missing state (or another algorithm's) reads as fresh, as
    /// `step::apply` would make it.
    pub(crate) fn into_record(self, rule: &Rule, now_ns: u64) -> Record {
        Record {
            expires_ns: self.expires_ns,
            state: self
                .state
                .unwrap_or_else(|| State::fresh(rule.algorithm(), now_ns)),
            guard: self.guard.map(Box::new),
        }
    }
}

fn put(out: &mut Vec<u8>, mut n: u64) {
    loop {
        let low = u8::try_from(n & 0x7f).unwrap_or(0);
        n >>= 7;
        if n == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
}

/// Encodes a record; `with_state: false` keeps only the expiry and the guard.
pub(crate) fn encode(record: &Record, with_state: bool) -> Result<Vec<u8>, StoreError> {
    let mut out = Vec::with_capacity(32);
    out.push(VERSION);
    put(&mut out, record.expires_ns);
    match record.guard.as_deref() {
        None => out.push(0),
        Some(g) => {
            out.push(1);
            put(&mut out, g.blocked_until_ns);
            put(&mut out, u64::from(g.strikes));
            put(&mut out, g.strikes_expire_ns);
        }
    }
    if !with_state {
        out.push(0);
        return Ok(out);
    }
    match &record.state {
        State::FixedWindow(s) => {
            out.push(1);
            put(&mut out, s.window_start_ns);
            put(&mut out, s.count);
        }
        State::Sliding(s) => {
            out.push(2);
            put(&mut out, u64::try_from(s.buckets.len()).unwrap_or(u64::MAX));
            for &(start, count) in &s.buckets {
                put(&mut out, start);
                put(&mut out, count);
            }
            put(&mut out, s.total);
        }
        State::Weighted(s) => {
            out.push(3);
            put(&mut out, s.window_start_ns);
            put(&mut out, s.previous);
            put(&mut out, s.current);
        }
        State::TokenBucket(s) => {
            out.push(4);
            put(&mut out, s.tokens);
            put(&mut out, s.last_ns);
        }
        State::LeakyBucket(s) => {
            out.push(5);
            put(&mut out, s.level);
            put(&mut out, s.last_ns);
        }
        State::Gcra(s) => {
            out.push(6);
            put(&mut out, s.tat_ns);
        }
        State::LeakyQueue(s) => {
            out.push(7);
            put(&mut out, s.next_free_ns);
        }
        State::Concurrency(s) => {
            out.push(8);
            put(&mut out, u64::try_from(s.leases.len()).unwrap_or(u64::MAX));
            for lease in &s.leases {
                put(
                    &mut out,
                    u64::try_from(lease.holder.len()).unwrap_or(u64::MAX),
                );
                out.extend_from_slice(lease.holder.as_bytes());
                put(&mut out, u64::from(lease.holds));
                put(&mut out, lease.expires_ns);
            }
        }
        State::GcraWarm(s) => {
            out.push(9);
            put(&mut out, s.state.tat_ns);
            put(&mut out, s.warm_ns);
        }
        State::TokenBucketWarm(s) => {
            out.push(10);
            put(&mut out, s.state.tokens);
            put(&mut out, s.state.last_ns);
            put(&mut out, s.warm_ns);
        }
        other => {
            return Err(StoreError::Corrupt(format!(
                "no encoding for state {other:?} in this version"
            )))
        }
    }
    Ok(out)
}

/// Reads integers off a value, failing instead of guessing.
struct Reader<'a> {
    bytes: &'a [u8],
}

fn corrupt(why: &str) -> StoreError {
    StoreError::Corrupt(format!("record: {why}"))
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, StoreError> {
        let (&first, rest) = self
            .bytes
            .split_first()
            .ok_or_else(|| corrupt("truncated"))?;
        self.bytes = rest;
        Ok(first)
    }

    fn u64(&mut self) -> Result<u64, StoreError> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let bits = u64::from(b & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(corrupt("integer overflows 64 bits"));
            }
            n |= bits << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
        }
        Err(corrupt("integer too long"))
    }

    fn u32(&mut self) -> Result<u32, StoreError> {
        u32::try_from(self.u64()?).map_err(|_| corrupt("count overflows 32 bits"))
    }

    /// A length, bounded by what is left to read (each item takes at least one byte).
    fn len(&mut self) -> Result<usize, StoreError> {
        let n = usize::try_from(self.u64()?).map_err(|_| corrupt("length"))?;
        if n > self.bytes.len() {
            return Err(corrupt("length beyond the value"));
        }
        Ok(n)
    }

    fn bytes(&mut self, n: usize) -> Result<&[u8], StoreError> {
        if n > self.bytes.len() {
            return Err(corrupt("truncated"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
}

/// Decodes a value written by [`encode`].
pub(crate) fn decode(bytes: &[u8]) -> Result<Stored, StoreError> {
    let mut r = Reader { bytes };
    let version = r.byte()?;
    if version != VERSION {
        return Err(StoreError::Corrupt(format!(
            "record version {version}, this build reads {VERSION}"
        )));
    }
    let expires_ns = r.u64()?;
    let guard = match r.byte()? {
        0 => None,
        1 => Some(Guard {
            blocked_until_ns: r.u64()?,
            strikes: r.u32()?,
            strikes_expire_ns: r.u64()?,
        }),
        _ => return Err(corrupt("guard tag")),
    };
    let state = match r.byte()? {
        0 => None,
        1 => Some(State::FixedWindow(FixedWindowState {
            window_start_ns: r.u64()?,
            count: r.u64()?,
        })),
        2 => {
            let n = r.len()?;
            let mut buckets = VecDeque::with_capacity(n);
            for _ in 0..n {
                buckets.push_back((r.u64()?, r.u64()?));
            }
            let total = r.u64()?;
            Some(State::Sliding(Box::new(SlidingState { buckets, total })))
        }
        3 => Some(State::Weighted(Box::new(WeightedWindowState {
            window_start_ns: r.u64()?,
            previous: r.u64()?,
            current: r.u64()?,
        }))),
        4 => Some(State::TokenBucket(TokenBucketState {
            tokens: r.u64()?,
            last_ns: r.u64()?,
        })),
        5 => Some(State::LeakyBucket(LeakyBucketState {
            level: r.u64()?,
            last_ns: r.u64()?,
        })),
        6 => Some(State::Gcra(GcraState { tat_ns: r.u64()? })),
        7 => Some(State::LeakyQueue(LeakyQueueState {
            next_free_ns: r.u64()?,
        })),
        8 => {
            let n = r.len()?;
            let mut leases = Vec::with_capacity(n);
            for _ in 0..n {
                let len = r.len()?;
                let holder = std::str::from_utf8(r.bytes(len)?)
                    .map_err(|_| corrupt("holder is not UTF-8"))?;
                leases.push(LeaseEntry {
                    holder: holder.into(),
                    holds: r.u32()?,
                    expires_ns: r.u64()?,
                });
            }
            Some(State::Concurrency(Box::new(ConcurrencyState { leases })))
        }
        9 => Some(State::GcraWarm(Warm {
            state: GcraState { tat_ns: r.u64()? },
            warm_ns: r.u64()?,
        })),
        10 => Some(State::TokenBucketWarm(Box::new(Warm {
            state: TokenBucketState {
                tokens: r.u64()?,
                last_ns: r.u64()?,
            },
            warm_ns: r.u64()?,
        }))),
        _ => return Err(corrupt("state tag")),
    };
    if !r.bytes.is_empty() {
        return Err(corrupt("trailing bytes"));
    }
    Ok(Stored {
        expires_ns,
        state,
        guard,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard() -> Option<Box<Guard>> {
        Some(Box::new(Guard {
            blocked_until_ns: 1_700_000_000_000_000_000,
            strikes: 3,
            strikes_expire_ns: u64::MAX,
        }))
    }

    fn states() -> Vec<State> {
        vec![
            State::FixedWindow(FixedWindowState {
                window_start_ns: 5,
                count: u64::MAX,
            }),
            State::Sliding(Box::new(SlidingState {
                buckets: VecDeque::from([(1, 0), (u64::MAX, 7)]),
                total: 7,
            })),
            State::Weighted(Box::new(WeightedWindowState {
                window_start_ns: 1,
                previous: 2,
                current: 3,
            })),
            State::TokenBucket(TokenBucketState {
                tokens: 4,
                last_ns: 0,
            }),
            State::LeakyBucket(LeakyBucketState {
                level: 9,
                last_ns: 127,
            }),
            State::Gcra(GcraState { tat_ns: 128 }),
            State::GcraWarm(Warm {
                state: GcraState { tat_ns: 129 },
                warm_ns: 30,
            }),
            State::TokenBucketWarm(Box::new(Warm {
                state: TokenBucketState {
                    tokens: 2,
                    last_ns: u64::MAX,
                },
                warm_ns: 0,
            })),
            State::LeakyQueue(LeakyQueueState { next_free_ns: 1 }),
            State::Concurrency(Box::new(ConcurrencyState {
                leases: vec![
                    LeaseEntry {
                        holder: "holder-é".into(),
                        holds: u32::MAX,
                        expires_ns: 99,
                    },
                    LeaseEntry {
                        holder: "b".into(),
                        holds: 1,
                        expires_ns: 0,
                    },
                ],
            })),
        ]
    }

    #[test]
    fn every_state_round_trips() {
        for state in states() {
            for guard in [None, guard()] {
                let record = Record {
                    expires_ns: 1_700_000_000_123_456_789,
                    state: state.clone(),
                    guard,
                };
                let bytes = encode(&record, true).unwrap();
                let back = decode(&bytes).unwrap();
                assert_eq!(back.expires_ns, record.expires_ns);
                assert_eq!(back.state.as_ref(), Some(&record.state));
                assert_eq!(back.guard.map(Box::new), record.guard);
            }
        }
    }

    #[test]
    fn a_guard_only_record_has_no_state() {
        let record = Record {
            expires_ns: 10,
            state: State::Gcra(GcraState { tat_ns: 1 }),
            guard: guard(),
        };
        let back = decode(&encode(&record, false).unwrap()).unwrap();
        assert_eq!(back.state, None);
        assert_eq!(back.guard.map(Box::new), record.guard);
    }

    #[test]
    fn unreadable_values_are_corrupt() {
        let good = encode(
            &Record {
                expires_ns: 300,
                state: State::Gcra(GcraState { tat_ns: 1 }),
                guard: None,
            },
            true,
        )
        .unwrap();
        let mut trailing = good.clone();
        trailing.push(0);
        let mut future = good.clone();
        future[0] = 2;
        for bad in [
            &b""[..],
            &good[..good.len() - 1],
            &trailing,
            &future,
            b"\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f\x00\x00",
            b"\x01\x00\x00\x08\x05",
            b"not a record",
        ] {
            assert!(
                matches!(decode(bad), Err(StoreError::Corrupt(_))),
                "{bad:?}"
            );
        }
    }
}
