//! The memory store's state snapshot: its limited, blocked and locked-out records as bytes
//! and back, so that a restart (`weir serve --state-file`) does not forget a lockout. It is
//! not on the path of a decision: the engine calls [`MemoryStore::export_limited`] every
//! interval and at shutdown and writes [`StateSnapshot::encode`]'s bytes; at start, before
//! serving, it reads them with [`StateSnapshot::decode`] and hands them to
//! [`MemoryStore::import`].
//!
//! **What is saved** (at the export's `now`, under the rule in force for the record's scope):
//! - a record with a block (manual or lockout) not yet over, or lockout strikes not yet
//!   forgiven;
//! - a **limited** record: one whose next request of one unit would be refused now, as
//!   the pure step's peek answers on a copy of it. Per algorithm that is: GCRA (and a token
//!   bucket that starts full, on the lock-free path) a TAT past `now + tolerance − T`; a
//!   token bucket with no whole token; a fixed window, sliding log / counter or weighted
//!   window whose count (estimate) is at its limit; a leaky bucket that is full; a queue
//!   that is full; concurrency leases that are all held.
//!
//! A key that would pass is not saved: forgetting it costs at most one fresh window, as
//! evicting it does. Nor are records whose scope is not a rule in force (a caller's limit
//! override, a rule since removed), nor states this format does not know.
//!
//! **The format** (version 1; integers little-endian): `WEIRSNAP`, the version (u32), 0
//! (u32, reserved), the export's instant (u64, ns since the Unix epoch), the record count
//! (u64), the body's length (u64), the body, then a checksum (u64, FNV-1a over everything
//! before it). A record is its scope (u64), its key (u16 length + bytes), its expiry
//! (u64), its guard (u8 0/1, then blocked-until u64, strikes u32, strikes-expire u64) and
//! its state (a u8 tag, then the state's integers; warm-up states add the time admitted
//! at full rate). Every time is absolute (ns since the
//! Unix epoch), so a restart after downtime reads them as they are: a block that ended
//! meanwhile is gone.
//!
//! **Nothing is trusted blindly.** A file above [`MAX_SNAPSHOT_BYTES`], without the magic,
//! of a newer version, whose length is not the header's, whose checksum does not match, or
//! whose records do not parse is refused whole ([`SnapshotError`] says which). A record
//! that parses but is not valid (a key of 0 or more than 512 bytes, an unsorted sliding log,
//! a lease without holder, an instant more than twice [`MAX_SPAN`](crate::MAX_SPAN) ahead
//! once clamped) is dropped alone, and so is one whose rule is no longer in force or that
//! has expired. A record that claims more than its rule allows (a 19-year lockout under a
//! rule whose lockout lasts an hour) is clamped to what the rule allows (`restore.rs`).
//!
//! This file frames the records (header, checksum, refusals); `snapshot/record.rs` is one
//! record's bytes, and `snapshot/select.rs` which records are saved and how they come back.

mod record;
mod select;

pub use record::SavedRecord;
use record::{decode_record, encode_record, Reader};

/// The largest snapshot written or read: 256 MiB.
pub const MAX_SNAPSHOT_BYTES: u64 = 256 << 20;
const MAGIC: &[u8; 8] = b"WEIRSNAP";
const VERSION: u32 = 1;
/// Magic, version, reserved, instant, count, body length.
const HEADER: usize = 8 + 4 + 4 + 8 + 8 + 8;
const CHECKSUM: usize = 8;
/// The most entries of a sliding log or counter (its algorithm's own bound).
const MAX_SLIDING: usize = 10_000;
/// The most leases of one key read back.
const MAX_LEASES: usize = 1 << 16;
/// The longest holder id.
const MAX_HOLDER: usize = crate::algorithm::Concurrency::MAX_HOLDER_LEN;

/// Why a snapshot's bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// Larger than [`MAX_SNAPSHOT_BYTES`].
    #[error("{size} bytes, more than a state snapshot may take ({max})")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The bound.
        max: u64,
    },
    /// It does not start with the magic: some other file.
    #[error("not a Weir state snapshot (it does not start with WEIRSNAP)")]
    Foreign,
    /// A newer Weir wrote it.
    #[error("format version {found}, newer than this Weir reads (up to {supported})")]
    TooNew {
        /// The file's version.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// Shorter or longer than its header says (a write cut short, or bytes appended).
    #[error("{found} bytes where the header announces {expected}: truncated or extended")]
    Length {
        /// The length the header announces (or the least a snapshot takes).
        expected: u64,
        /// The actual length.
        found: u64,
    },
    /// The checksum does not match the contents.
    #[error("checksum mismatch: the contents are corrupt")]
    Checksum,
    /// The checksum matched but the contents do not parse (a writer's bug, or not ours).
    #[error("malformed: {0}")]
    Malformed(String),
}

/// A memory store's limited, blocked and locked-out records at one instant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StateSnapshot {
    /// When it was taken, ns since the Unix epoch.
    pub taken_ns: u64,
    /// The records.
    pub records: Vec<SavedRecord>,
    /// Records read that were not valid, why (at most the first few).
    invalid: Vec<String>,
    /// How many records read were not valid.
    invalid_count: usize,
}

/// What [`MemoryStore::import`](crate::MemoryStore::import) did with a snapshot's records.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportReport {
    /// Records now held.
    pub restored: usize,
    /// Dropped: expired since the snapshot was taken (a block that ended meanwhile).
    pub expired: usize,
    /// Dropped: their rule is no longer in force.
    pub no_rule: usize,
    /// Dropped: not valid (see [`ImportReport::first_invalid`]).
    pub invalid: usize,
    /// Dropped: the store had no room.
    pub refused: usize,
    /// Restored, but clamped to what their rule allows (a block, a lockout or a state
    /// reaching further ahead than the rule could have set it).
    pub clamped: usize,
    /// Why the first clamped record was clamped.
    pub first_clamped: Option<String>,
    /// Why the first invalid record was dropped.
    pub first_invalid: Option<String>,
}

impl StateSnapshot {
    /// The snapshot as bytes (the module docs give the format).
    pub fn encode(&self) -> Result<Vec<u8>, SnapshotError> {
        let mut body = Vec::new();
        let mut count = 0u64;
        for saved in &self.records {
            if encode_record(&mut body, saved) {
                count += 1;
            }
        }
        let size = u64::try_from(HEADER + body.len() + CHECKSUM).unwrap_or(u64::MAX);
        if size > MAX_SNAPSHOT_BYTES {
            return Err(SnapshotError::TooLarge {
                size,
                max: MAX_SNAPSHOT_BYTES,
            });
        }
        let mut out = Vec::with_capacity(HEADER + body.len() + CHECKSUM);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&self.taken_ns.to_le_bytes());
        out.extend_from_slice(&count.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        let sum = checksum(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        Ok(out)
    }

    /// Reads a snapshot, refusing bytes that are not one whole, intact snapshot of a
    /// version this build reads. Records that parse but are not valid are left out (counted
    /// in [`MemoryStore::import`](crate::MemoryStore::import)'s report).
    pub fn decode(bytes: &[u8]) -> Result<StateSnapshot, SnapshotError> {
        let size = bytes.len() as u64;
        if size > MAX_SNAPSHOT_BYTES {
            return Err(SnapshotError::TooLarge {
                size,
                max: MAX_SNAPSHOT_BYTES,
            });
        }
        let magic_len = bytes.len().min(MAGIC.len());
        if bytes.get(..magic_len) != MAGIC.get(..magic_len) {
            return Err(SnapshotError::Foreign);
        }
        let least = (HEADER + CHECKSUM) as u64;
        if bytes.len() < HEADER + CHECKSUM {
            return Err(SnapshotError::Length {
                expected: least,
                found: size,
            });
        }
        let mut header = Reader::new(bytes.get(MAGIC.len()..HEADER).unwrap_or_default());
        let version = header.u32()?;
        if version > VERSION {
            return Err(SnapshotError::TooNew {
                found: version,
                supported: VERSION,
            });
        }
        if version == 0 || header.u32()? != 0 {
            return Err(SnapshotError::Malformed(format!(
                "version {version} or its reserved field is not one this build writes"
            )));
        }
        let taken_ns = header.u64()?;
        let count = header.u64()?;
        let body_len = header.u64()?;
        let expected = body_len.saturating_add(least);
        if expected != size {
            return Err(SnapshotError::Length {
                expected,
                found: size,
            });
        }
        let (content, sum) = bytes.split_at(bytes.len() - CHECKSUM);
        if checksum(content) != u64::from_le_bytes(sum.try_into().unwrap_or_default()) {
            return Err(SnapshotError::Checksum);
        }
        let mut body = Reader::new(content.get(HEADER..).unwrap_or_default());
        let mut snapshot = StateSnapshot {
            taken_ns,
            ..StateSnapshot::default()
        };
        for i in 0..count {
            match decode_record(&mut body)
                .map_err(|e| SnapshotError::Malformed(format!("record {i}: {e}")))?
            {
                Ok(saved) => snapshot.records.push(saved),
                Err(reason) => snapshot.invalid(format!("record {i}: {reason}")),
            }
        }
        if !body.rest.is_empty() {
            return Err(SnapshotError::Malformed(format!(
                "{} bytes after the {count} records the header announces",
                body.rest.len()
            )));
        }
        Ok(snapshot)
    }

    fn invalid(&mut self, reason: String) {
        self.invalid_count += 1;
        if self.invalid.len() < 4 {
            self.invalid.push(reason);
        }
    }
}

/// FNV-1a over `bytes` (`scope.rs`'s stable hash, tagged).
fn checksum(bytes: &[u8]) -> u64 {
    crate::scope::stable_hash("weir-state-snapshot", &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{
        ConcurrencyState, FixedWindowState, GcraState, LeakyBucketState, LeakyQueueState,
        LeaseEntry, SlidingState, TokenBucketState, Warm, WeightedWindowState,
    };
    use crate::key::Key;
    use crate::state::{Guard, Record, State};
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const T0: u64 = 1_700_000_000_000_000_000;

    fn saved(scope: u64, key: &str, state: State, guard: Option<Guard>) -> SavedRecord {
        SavedRecord {
            scope,
            key: Key::new(key).unwrap(),
            record: Record {
                expires_ns: T0 + 60_000_000_000,
                state,
                guard: guard.map(Box::new),
            },
        }
    }

    /// One record of every state the format holds, some with a guard.
    fn every_state() -> StateSnapshot {
        let guard = Guard {
            blocked_until_ns: T0 + 5,
            strikes: 2,
            strikes_expire_ns: T0 + 9,
        };
        let sliding = SlidingState {
            buckets: VecDeque::from([(T0, 2), (T0 + 10, 3)]),
            total: 5,
        };
        let leases = ConcurrencyState {
            leases: vec![LeaseEntry {
                holder: "worker-1".into(),
                holds: 2,
                expires_ns: T0 + 7,
            }],
        };
        let records = vec![
            saved(
                1,
                "fixed",
                State::FixedWindow(FixedWindowState {
                    window_start_ns: T0,
                    count: 3,
                }),
                Some(guard),
            ),
            saved(2, "sliding", State::Sliding(Box::new(sliding)), None),
            saved(
                3,
                "weighted",
                State::Weighted(Box::new(WeightedWindowState {
                    window_start_ns: T0,
                    previous: 4,
                    current: 1,
                })),
                None,
            ),
            saved(
                4,
                "bucket",
                State::TokenBucket(TokenBucketState {
                    tokens: 0,
                    last_ns: T0,
                }),
                None,
            ),
            saved(
                5,
                "leaky",
                State::LeakyBucket(LeakyBucketState {
                    level: 9,
                    last_ns: T0,
                }),
                None,
            ),
            saved(
                6,
                "gcra",
                State::Gcra(GcraState { tat_ns: T0 + 3 }),
                Some(guard),
            ),
            saved(
                7,
                "queue",
                State::LeakyQueue(LeakyQueueState {
                    next_free_ns: T0 + 1,
                }),
                None,
            ),
            saved(8, "leases", State::Concurrency(Box::new(leases)), None),
            saved(
                9,
                "gcra-warm",
                State::GcraWarm(Warm {
                    state: GcraState { tat_ns: T0 + 4 },
                    warm_ns: 11,
                }),
                None,
            ),
            saved(
                10,
                "bucket-warm",
                State::TokenBucketWarm(Box::new(Warm {
                    state: TokenBucketState {
                        tokens: 1,
                        last_ns: T0,
                    },
                    warm_ns: 12,
                })),
                None,
            ),
        ];
        StateSnapshot {
            taken_ns: T0,
            records,
            ..StateSnapshot::default()
        }
    }

    #[test]
    fn every_state_round_trips() {
        let snapshot = every_state();
        let bytes = snapshot.encode().unwrap();
        assert_eq!(StateSnapshot::decode(&bytes).unwrap(), snapshot);
        let empty = StateSnapshot::default().encode().unwrap();
        assert_eq!(empty.len(), HEADER + CHECKSUM);
        assert_eq!(
            StateSnapshot::decode(&empty).unwrap(),
            StateSnapshot::default()
        );
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_refused() {
        let bytes = every_state().encode().unwrap();
        for i in 0..bytes.len() {
            for bit in [0x01, 0x80] {
                let mut bad = bytes.clone();
                bad[i] ^= bit;
                let error = StateSnapshot::decode(&bad).unwrap_err();
                let expected = match i {
                    0..8 => matches!(error, SnapshotError::Foreign),
                    // The version: newer, or 0 / 1 with a low bit flipped.
                    8..12 => matches!(
                        error,
                        SnapshotError::TooNew { .. } | SnapshotError::Malformed(_)
                    ),
                    12..16 => matches!(error, SnapshotError::Malformed(_)),
                    // The body length: the file is not that long.
                    32..40 => matches!(error, SnapshotError::Length { .. }),
                    _ => error == SnapshotError::Checksum,
                };
                assert!(expected, "byte {i} ^ {bit:#x}: {error}");
            }
        }
        for len in 0..bytes.len() {
            let error = StateSnapshot::decode(&bytes[..len]).unwrap_err();
            assert!(
                matches!(error, SnapshotError::Length { found, .. } if found == len as u64),
                "{len} bytes: {error}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            StateSnapshot::decode(&longer),
            Err(SnapshotError::Length { .. })
        ));
    }

    #[test]
    fn foreign_future_oversized_and_malformed_files_are_refused_saying_why() {
        let bytes = every_state().encode().unwrap();
        let foreign = StateSnapshot::decode(b"{\"not\": \"a snapshot\"}").unwrap_err();
        assert_eq!(foreign, SnapshotError::Foreign);
        assert!(foreign.to_string().contains("not a Weir state snapshot"));

        // A newer version, checksum and all: refused for its version, not as corrupt.
        let mut future = bytes.clone();
        future[8..12].copy_from_slice(&2u32.to_le_bytes());
        let end = future.len() - CHECKSUM;
        let sum = checksum(&future[..end]);
        future[end..].copy_from_slice(&sum.to_le_bytes());
        let error = StateSnapshot::decode(&future).unwrap_err();
        assert_eq!(
            error,
            SnapshotError::TooNew {
                found: 2,
                supported: 1
            }
        );
        assert!(
            error.to_string().contains("newer than this Weir reads"),
            "{error}"
        );

        let huge = vec![0u8; usize::try_from(MAX_SNAPSHOT_BYTES).unwrap() + 1];
        assert!(matches!(
            StateSnapshot::decode(&huge),
            Err(SnapshotError::TooLarge { .. })
        ));

        // An intact checksum over contents that do not parse: one record announced, none
        // there.
        let mut lying = StateSnapshot::default().encode().unwrap();
        lying[24..32].copy_from_slice(&1u64.to_le_bytes());
        let end = lying.len() - CHECKSUM;
        let sum = checksum(&lying[..end]);
        lying[end..].copy_from_slice(&sum.to_le_bytes());
        let error = StateSnapshot::decode(&lying).unwrap_err();
        assert!(
            matches!(&error, SnapshotError::Malformed(why) if why.starts_with("record 0")),
            "{error}"
        );
    }

    #[test]
    fn a_record_that_parses_but_breaks_an_invariant_is_dropped_alone() {
        let mut snapshot = every_state();
        let State::Sliding(sliding) = &mut snapshot.records[1].record.state else {
            panic!()
        };
        sliding.total = 99; // not the sum of its entries
        let decoded = StateSnapshot::decode(&snapshot.encode().unwrap()).unwrap();
        assert_eq!(decoded.records.len(), 9);
        assert_eq!(decoded.invalid_count, 1);
        assert!(
            decoded.invalid[0].contains("sliding"),
            "{:?}",
            decoded.invalid
        );
    }

    fn any_state() -> impl Strategy<Value = State> {
        let t = T0..T0 + 1_000_000_000_000;
        prop_oneof![
            (t.clone(), any::<u64>()).prop_map(|(w, c)| State::FixedWindow(FixedWindowState {
                window_start_ns: w,
                count: c
            })),
            prop::collection::vec((1u64..1000, 1u64..50), 0..20).prop_map(|steps| {
                let mut start = T0;
                let buckets: VecDeque<(u64, u64)> = steps
                    .into_iter()
                    .map(|(gap, count)| {
                        start += gap;
                        (start, count)
                    })
                    .collect();
                let total = buckets.iter().map(|b| b.1).sum();
                State::Sliding(Box::new(SlidingState { buckets, total }))
            }),
            t.clone()
                .prop_map(|tat| State::Gcra(GcraState { tat_ns: tat })),
            (t.clone(), 0u64..1_000_000).prop_map(|(tat, warm_ns)| State::GcraWarm(Warm {
                state: GcraState { tat_ns: tat },
                warm_ns
            })),
            (any::<u64>(), t.clone()).prop_map(|(tokens, last)| State::TokenBucket(
                TokenBucketState {
                    tokens,
                    last_ns: last
                }
            )),
            prop::collection::vec(("[a-z]{1,20}", 1u32..5, t), 0..5).prop_map(|leases| {
                State::Concurrency(Box::new(ConcurrencyState {
                    leases: leases
                        .into_iter()
                        .map(|(holder, holds, expires_ns)| LeaseEntry {
                            holder: holder.into(),
                            holds,
                            expires_ns,
                        })
                        .collect(),
                }))
            }),
        ]
    }

    fn any_snapshot() -> impl Strategy<Value = StateSnapshot> {
        let guard = prop::option::of((any::<u64>(), any::<u32>(), any::<u64>()).prop_map(
            |(b, s, e)| Guard {
                blocked_until_ns: b,
                strikes: s,
                strikes_expire_ns: e,
            },
        ));
        let record = (
            any::<u64>(),
            prop::collection::vec(any::<u8>(), 1..600),
            any::<u64>(),
            guard,
            any_state(),
        );
        prop::collection::vec(record, 0..12).prop_map(|records| StateSnapshot {
            taken_ns: T0,
            records: records
                .into_iter()
                .filter_map(|(scope, key, expires_ns, guard, state)| {
                    Some(SavedRecord {
                        scope,
                        key: Key::new(key.get(..key.len().min(Key::MAX_LEN))?).ok()?,
                        record: Record {
                            expires_ns,
                            state,
                            guard: guard.map(Box::new),
                        },
                    })
                })
                .collect(),
            ..StateSnapshot::default()
        })
    }

    proptest! {
        #[test]
        fn snapshots_round_trip_and_any_damage_is_refused(
            snapshot in any_snapshot(),
            at in any::<prop::sample::Index>(),
            flip in 1u8..,
            cut in any::<prop::sample::Index>(),
        ) {
            let bytes = snapshot.encode().unwrap();
            prop_assert_eq!(&StateSnapshot::decode(&bytes).unwrap(), &snapshot);
            let mut bad = bytes.clone();
            bad[at.index(bytes.len())] ^= flip;
            prop_assert!(StateSnapshot::decode(&bad).is_err());
            prop_assert!(StateSnapshot::decode(&bytes[..cut.index(bytes.len())]).is_err());
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let mut with_magic = MAGIC.to_vec();
            with_magic.extend_from_slice(&bytes);
            let _ = StateSnapshot::decode(&bytes);
            let _ = StateSnapshot::decode(&with_magic);
        }
    }
}
