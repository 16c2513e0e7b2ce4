//! The "top denied keys" of the admin API: a Space-Saving sketch (Metwally, Agrawal and El
//! Abbadi, 2005) of fixed capacity. Fed on the denial path only, never read by a decision.
//! The engine keeps two: enforced denials (`Engine::top_denied`) and denials not enforced
//! (shadow mode, roll-out: `Engine::top_shadow_denied`), so a shadow key never ranks among
//! the most denied and the totals match the `denied` / `shadow_denied` outcomes. Memory is bounded whatever the traffic: at most `capacity`
//! keys are held, and a new key evicts the one with the smallest count.
//!
//! Guarantee: any key denied more than `total / capacity` times is in the sketch, and each
//! reported count overestimates the true count by at most its `error`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use weir_core::Key;

/// One tracked key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HeavyHitter {
    /// The counted key (the namespaced limiter key, never a metrics label).
    pub key: String,
    /// The rule it was denied by (the last one seen).
    pub rule: String,
    /// Denials counted (an upper bound of the true count).
    pub count: u64,
    /// How much of `count` may belong to keys it evicted (`count - error` is a lower bound).
    pub error: u64,
}

#[derive(Debug)]
struct Slot {
    key: Key,
    rule: Arc<str>,
    count: u64,
    error: u64,
}

#[derive(Debug, Default)]
struct Table {
    slots: Vec<Slot>,
    index: HashMap<Key, usize>,
    total: u64,
}

/// A Space-Saving sketch of the most denied keys. Cheap to share (`&self` methods).
#[derive(Debug)]
pub struct TopDenied {
    capacity: usize,
    table: Mutex<Table>,
}

impl TopDenied {
    /// A sketch holding at most `capacity` keys (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            table: Mutex::new(Table::default()),
        }
    }

    /// Counts one denial of `key` under `rule`.
    pub fn record(&self, key: &Key, rule: &Arc<str>) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let table = &mut *table;
        table.total = table.total.saturating_add(1);
        if let Some(&i) = table.index.get(key) {
            if let Some(slot) = table.slots.get_mut(i) {
                slot.count = slot.count.saturating_add(1);
                slot.rule = Arc::clone(rule);
            }
            return;
        }
        if table.slots.len() < self.capacity {
            table.index.insert(key.clone(), table.slots.len());
            table.slots.push(Slot {
                key: key.clone(),
                rule: Arc::clone(rule),
                count: 1,
                error: 0,
            });
            return;
        }
        // Replace the smallest counter: the newcomer inherits its count as error.
        let Some((i, _)) = table.slots.iter().enumerate().min_by_key(|(_, s)| s.count) else {
            return;
        };
        if let Some(slot) = table.slots.get_mut(i) {
            table.index.remove(&slot.key);
            let min = slot.count;
            *slot = Slot {
                key: key.clone(),
                rule: Arc::clone(rule),
                count: min.saturating_add(1),
                error: min,
            };
            table.index.insert(key.clone(), i);
        }
    }

    /// The `n` most denied keys, most first, and the total denials counted.
    pub fn top(&self, n: usize) -> (Vec<HeavyHitter>, u64) {
        let table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let mut top: Vec<HeavyHitter> = table
            .slots
            .iter()
            .map(|s| HeavyHitter {
                key: s.key.to_string(),
                rule: s.rule.to_string(),
                count: s.count,
                error: s.error,
            })
            .collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        top.truncate(n);
        (top, table.total)
    }

    /// The most keys held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Key {
        Key::new(s).unwrap()
    }

    #[test]
    fn a_heavy_key_survives_a_flood_of_distinct_keys() {
        let sketch = TopDenied::new(8);
        let rule: Arc<str> = Arc::from("api.user");
        for i in 0..10_000u32 {
            sketch.record(&key(&format!("noise-{i}")), &rule);
            if i % 4 == 0 {
                sketch.record(&key("attacker"), &rule);
            }
        }
        let (top, total) = sketch.top(3);
        assert_eq!(total, 12_500);
        assert_eq!(top[0].key, "attacker");
        assert!(top[0].count - top[0].error <= 2_500 && top[0].count >= 2_500);
        assert_eq!(sketch.top(100).0.len(), 8, "bounded by capacity");
    }
}
