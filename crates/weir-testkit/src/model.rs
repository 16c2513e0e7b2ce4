//! The reference model: a plain map from key to [`Record`], changed only by the pure
//! [`apply`] step. Whatever a store answers must equal what this answers.

use std::collections::HashMap;

use weir_core::step::{apply, check_now};
use weir_core::{CheckError, Decisions, Key, Op, Outcome, Record, Rule};

/// The reference model of a store.
#[derive(Debug, Default, Clone)]
pub struct Model {
    records: HashMap<Key, Record>,
}

impl Model {
    /// An empty model.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies `op` to `key` at `now_ns`, as a store must.
    pub fn apply(
        &mut self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let held = self.records.remove(key);
        let held_live = held.as_ref().is_some_and(|r| r.is_live(now_ns));
        let mut record = held.unwrap_or_else(|| Record::fresh(rule, now_ns));
        let outcome = apply(rule, &mut record, &op, now_ns);
        if op.keeps(held_live, &record, now_ns) {
            self.records.insert(key.clone(), record);
        }
        outcome
    }

    /// Checks several limits all-or-nothing, as [`Store::check_all`](weir_core::Store::check_all)
    /// must.
    pub fn check_all(
        &mut self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        let mut work: Vec<(Key, Record)> = Vec::new();
        // For each limit, the index of its key's working copy (a key may repeat).
        let mut slots = Vec::new();
        let mut each = Vec::new();
        for (key, rule) in limits {
            let slot = match work.iter().position(|(k, _)| k == key) {
                Some(i) => i,
                None => {
                    let copy = self
                        .records
                        .get(key)
                        .filter(|r| r.is_live(now_ns))
                        .cloned()
                        .unwrap_or_else(|| Record::fresh(rule, now_ns));
                    work.push((key.clone(), copy));
                    work.len() - 1
                }
            };
            slots.push(slot);
            each.push(check_now(rule, &mut work[slot].1, cost, now_ns)?);
        }
        let allowed = each.iter().all(|d| d.allowed);
        for (slot, (key, record)) in work.into_iter().enumerate() {
            let denied_here = slots
                .iter()
                .zip(&each)
                .any(|(s, d)| *s == slot && !d.allowed);
            if cost > 0 && (allowed || denied_here) {
                if record.is_live(now_ns) {
                    self.records.insert(key, record);
                } else {
                    self.records.remove(&key);
                }
            }
        }
        Ok(Decisions { allowed, each })
    }

    /// The record of `key`, if the model holds one.
    pub fn record(&self, key: &Key) -> Option<&Record> {
        self.records.get(key)
    }
}
