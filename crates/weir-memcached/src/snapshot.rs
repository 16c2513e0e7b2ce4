//! A key's record as read from memcached: the third step of a decision. Takes the values a
//! `gets` returned for the names `layout.rs` chose, and rebuilds the exact [`Record`] the
//! reference model would hold, so that `step::apply` decides on it unchanged. Pure; the
//! writes that follow are planned in `plan.rs`.
//!
//! A counter's record is put together from parts: the guard from the record name, and the
//! state from the live buckets (a fixed window's current count, a sliding window's non-empty
//! buckets in order). Parts that stopped counting are left out, which changes no decision:
//! the step would treat them as fresh.

use std::collections::{HashMap, VecDeque};

use weir_core::algorithm::{FixedWindowState, SlidingState};
use weir_core::{step, CheckError, Guard, Op, Record, Rule, State, StoreError};

use crate::client::{parse_number, Value};
use crate::codec::{self, Stored};
use crate::keys::Names;
use crate::layout::{Counter, CounterKind, Layout};

/// A value as read: its bytes and CAS unique; `None` when memcached had no such key.
pub(crate) type Found = Option<(Vec<u8>, u64)>;

/// One counter bucket as read.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    pub start_ns: u64,
    pub name: String,
    pub found: Found,
    /// The stored number (count plus the layout's offset); `None` when absent or deleted.
    pub value: Option<u64>,
}

/// A key's record as read.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub layout: Layout,
    pub names: Names,
    pub record_name: String,
    pub record_found: Found,
    /// The decoded record value; `None` when absent or a tombstone.
    pub stored: Option<Stored>,
    pub buckets: Vec<Bucket>,
    /// Seconds memcached keeps what is written past its freshness (the store's
    /// `ttl_grace`, given to [`Snapshot::read`]: no snapshot is made without it).
    pub ttl_grace_s: u32,
}

/// The names to read for `layout` at `now_ns`: the record name first, then the buckets.
pub(crate) fn names_to_read(layout: &Layout, names: &Names, now_ns: u64) -> Vec<String> {
    let mut out = vec![names.record()];
    if let Layout::Counter(c) = layout {
        out.extend(c.starts(now_ns).into_iter().map(|s| c.name(names, s)));
    }
    out
}

/// Whether a guard still blocks or remembers strikes at `now_ns`.
pub(crate) fn live_guard(guard: Option<&Guard>, now_ns: u64) -> Option<Guard> {
    guard
        .filter(|g| g.blocked_until_ns.max(g.strikes_expire_ns) > now_ns)
        .copied()
}

impl Snapshot {
    /// Builds the snapshot from a `gets` reply; its writes are kept `ttl_grace_s` seconds
    /// past their freshness (the store's `ttl_grace`).
    pub(crate) fn read(
        layout: Layout,
        names: &Names,
        now_ns: u64,
        values: &HashMap<String, Value>,
        ttl_grace_s: u32,
    ) -> Result<Self, StoreError> {
        let found = |name: &str| values.get(name).map(|v| (v.data.clone(), v.unique));
        let record_name = names.record();
        let record_found = found(&record_name);
        let stored = match &record_found {
            Some((data, _)) if !data.is_empty() => Some(codec::decode(data)?),
            _ => None,
        };
        let mut buckets = Vec::new();
        if let Layout::Counter(c) = &layout {
            for start_ns in c.starts(now_ns) {
                let name = c.name(names, start_ns);
                let found = found(&name);
                let value = match &found {
                    // Absent, or an empty tombstone: no bucket.
                    None => None,
                    Some((data, _)) if data.is_empty() => None,
                    Some((data, _)) => Some(parse_number(data).ok_or_else(|| {
                        StoreError::Corrupt(format!("counter {name} is not a number"))
                    })?),
                };
                buckets.push(Bucket {
                    start_ns,
                    name,
                    found,
                    value,
                });
            }
        }
        Ok(Self {
            layout,
            names: names.clone(),
            record_name,
            record_found,
            stored,
            buckets,
            ttl_grace_s,
        })
    }

    /// Whether the model would hold a record for this key (record layout): a value that is
    /// neither absent nor a tombstone, live or not.
    pub(crate) fn held(&self) -> bool {
        self.stored.is_some()
    }

    /// The guard as stored, live or not.
    pub(crate) fn stored_guard(&self) -> Option<&Guard> {
        self.stored.as_ref().and_then(|s| s.guard.as_ref())
    }

    /// The record `step::apply` must run on.
    pub(crate) fn record(&self, rule: &Rule, now_ns: u64) -> Result<Record, CheckError> {
        let Layout::Counter(counter) = &self.layout else {
            return Ok(match &self.stored {
                Some(stored) => stored.clone().into_record(rule, now_ns),
                None => Record::fresh(rule, now_ns),
            });
        };
        let mut record = Record {
            // Not expired: the expiry is recomputed just below from the parts themselves.
            expires_ns: u64::MAX,
            state: self.counter_state(counter),
            guard: self.stored_guard().copied().map(Box::new),
        };
        // `inspect` changes nothing but sets `expires_ns` exactly as the last write would
        // have left it (the state's and the guard's), and drops a guard that is over.
        step::apply(rule, &mut record, &Op::Inspect, now_ns)?;
        Ok(record)
    }

    /// The count of each bucket read, oldest first (`None`: no bucket).
    pub(crate) fn counts(&self, counter: &Counter) -> Vec<(u64, Option<u64>)> {
        self.buckets
            .iter()
            .map(|b| {
                let count = b.value.and_then(|v| v.checked_sub(counter.offset()));
                (b.start_ns, count)
            })
            .collect()
    }

    fn counter_state(&self, counter: &Counter) -> State {
        let counts = self.counts(counter);
        match counter.kind {
            CounterKind::Fixed => {
                let (window_start_ns, count) = counts.last().copied().unwrap_or((0, None));
                State::FixedWindow(FixedWindowState {
                    window_start_ns,
                    count: count.unwrap_or(0),
                })
            }
            CounterKind::Sliding => {
                let buckets: VecDeque<(u64, u64)> = counts
                    .into_iter()
                    .filter_map(|(start, count)| Some((start, count?)))
                    .collect();
                let total = buckets
                    .iter()
                    .fold(0u64, |sum, (_, count)| sum.saturating_add(*count));
                State::Sliding(Box::new(SlidingState { buckets, total }))
            }
        }
    }

    /// The same snapshot with one bucket's stored number replaced (what an `incr` found).
    /// The bucket exists, whether or not the read saw it: a decision on this snapshot is only
    /// ever compared with that `incr`, never sent (a bucket the read missed gets a unique of
    /// 0, which no `cas` uses).
    pub(crate) fn with_value(&self, name: &str, value: u64) -> Self {
        let mut copy = self.clone();
        for bucket in &mut copy.buckets {
            if bucket.name == name {
                bucket.value = Some(value);
                if bucket.found.is_none() {
                    bucket.found = Some((value.to_string().into_bytes(), 0));
                }
            }
        }
        copy
    }
}
