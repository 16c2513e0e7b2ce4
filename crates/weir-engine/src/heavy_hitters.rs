//! The "top denied keys" of the admin API: a Space-Saving sketch (Metwally, Agrawal and El
//! Abbadi, 2005) of fixed capacity. Fed on the denial path only, never read by a decision.
//! The engine keeps two: enforced denials (`Engine::top_denied`) and denials not enforced
//! (shadow mode, roll-out: `Engine::top_shadow_denied`), so a shadow key never ranks among
//! the most denied and the totals match the `denied` / `shadow_denied` outcomes. Memory is
//! bounded whatever the traffic: at most `capacity` keys a shard are held, and a new key
//! evicts the one with the smallest count (found at the root of a min-heap: O(log capacity)
//! a denial of a new key, what a flood of distinct keys pays on every denial).
//!
//! Each sketch is sharded: a thread records into a shard of its own (the first threads to
//! record each get a distinct one), so the two workers of a pipelined flood of denials never
//! move the sketch's cache lines between their cores; reading the sketch (the admin API, the
//! dashboard) merges the shards. A key absent from a full shard may have been evicted there
//! after up to that shard's smallest count, so the merge adds that count to the key's count
//! and to its error (Space-Saving summaries merge so: Agarwal et al., "Mergeable Summaries",
//! 2012). Memory: at most `capacity` keys a shard, twice the cores' shards (`thread_shard.rs`).
//!
//! Guarantee: any key denied more than `total / capacity` times is held in some shard, each
//! reported count overestimates the true count by at most its `error`, and `error` is at
//! most `total / capacity`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use weir_core::Key;

use crate::thread_shard;

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

/// The sketch's keys, and which holds the smallest count. A denial of a new key replaces
/// the smallest: with a flood of distinct denied keys (a scan, an attack) that is every
/// denial, so the smallest is kept at the root of a binary min-heap of slot ids (`heap`,
/// each slot's place in it in `place`): O(log capacity) a denial, not a scan of every slot
/// under the lock (what a pipelined RESP flood of new keys paid before, 9 % of its CPU).
#[derive(Debug, Default)]
struct Table {
    /// The tracked keys; a slot keeps its id while it holds a key and when it is reused.
    slots: Vec<Slot>,
    /// Slot ids as a binary min-heap on their count: `heap[0]` holds the smallest.
    heap: Vec<usize>,
    /// Each slot's position in `heap`.
    place: Vec<usize>,
    index: HashMap<Key, usize>,
    total: u64,
}

impl Table {
    /// The count of the slot at heap position `at` (none past the end).
    fn count_at(&self, at: usize) -> Option<u64> {
        let id = *self.heap.get(at)?;
        self.slots.get(id).map(|slot| slot.count)
    }

    /// Swaps heap positions `a` and `b` (both in the heap), keeping `place` true.
    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        for at in [a, b] {
            if let Some(&id) = self.heap.get(at) {
                if let Some(place) = self.place.get_mut(id) {
                    *place = at;
                }
            }
        }
    }

    /// Moves the slot at heap position `at` down while a child holds a smaller count (its
    /// count grew).
    fn sift_down(&mut self, mut at: usize) {
        loop {
            let Some(here) = self.count_at(at) else {
                return;
            };
            let mut smallest = (at, here);
            for child in [2 * at + 1, 2 * at + 2] {
                if let Some(count) = self.count_at(child) {
                    if count < smallest.1 {
                        smallest = (child, count);
                    }
                }
            }
            if smallest.0 == at {
                return;
            }
            self.swap(at, smallest.0);
            at = smallest.0;
        }
    }

    /// Moves the slot at heap position `at` up while its parent holds a larger count (a new
    /// slot, counted once).
    fn sift_up(&mut self, mut at: usize) {
        while at > 0 {
            let parent = (at - 1) / 2;
            match (self.count_at(at), self.count_at(parent)) {
                (Some(here), Some(above)) if here < above => {
                    self.swap(at, parent);
                    at = parent;
                }
                _ => return,
            }
        }
    }

    /// Counts one denial of `key` under `rule` in a table of at most `capacity` keys.
    fn record(&mut self, capacity: usize, key: &Key, rule: &Arc<str>) {
        self.total = self.total.saturating_add(1);
        if let Some(&id) = self.index.get(key) {
            if let Some(slot) = self.slots.get_mut(id) {
                slot.count = slot.count.saturating_add(1);
                if !Arc::ptr_eq(&slot.rule, rule) {
                    slot.rule = Arc::clone(rule);
                }
            }
            if let Some(&at) = self.place.get(id) {
                self.sift_down(at);
            }
            return;
        }
        if self.slots.len() < capacity {
            let id = self.slots.len();
            self.index.insert(key.clone(), id);
            self.slots.push(Slot {
                key: key.clone(),
                rule: Arc::clone(rule),
                count: 1,
                error: 0,
            });
            self.place.push(self.heap.len());
            self.heap.push(id);
            self.sift_up(self.heap.len() - 1);
            return;
        }
        // Replace the smallest counter: the newcomer inherits its count as error.
        let Some(&id) = self.heap.first() else {
            return;
        };
        let Some(slot) = self.slots.get_mut(id) else {
            return;
        };
        let min = slot.count;
        let old = std::mem::replace(
            slot,
            Slot {
                key: key.clone(),
                rule: Arc::clone(rule),
                count: min.saturating_add(1),
                error: min,
            },
        );
        self.index.remove(&old.key);
        self.index.insert(key.clone(), id);
        self.sift_down(0);
    }
}

/// One shard on cache lines of its own, so two shards' locks never share one.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Shard(Mutex<Table>);

/// A Space-Saving sketch of the most denied keys. Cheap to share (`&self` methods).
#[derive(Debug)]
pub struct TopDenied {
    capacity: usize,
    shards: Box<[Shard]>,
}

impl TopDenied {
    /// A sketch holding at most `capacity` keys (at least 1) in each of its shards.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            shards: (0..thread_shard::shard_count())
                .map(|_| Shard::default())
                .collect(),
        }
    }

    /// Counts one denial of `key` under `rule`, in this thread's shard.
    pub fn record(&self, key: &Key, rule: &Arc<str>) {
        let Some(shard) = self
            .shards
            .get(thread_shard::this_thread(self.shards.len()))
        else {
            return;
        };
        let mut table = shard.0.lock().unwrap_or_else(PoisonError::into_inner);
        table.record(self.capacity, key, rule);
    }

    /// The `n` most denied keys, most first, and the total denials counted: the shards
    /// merged (a key's count and error summed over the shards that hold it, plus each full
    /// shard's smallest count for the shards that do not; its rule the one of the shard
    /// that counted it most).
    pub fn top(&self, n: usize) -> (Vec<HeavyHitter>, u64) {
        // Per key: the merged figures, the largest count one shard holds, and the sum of the
        // smallest counts of the full shards that hold it.
        let mut merged: HashMap<Key, (HeavyHitter, u64, u64)> = HashMap::new();
        let mut total = 0u64;
        // The sum of every full shard's smallest count.
        let mut floors = 0u64;
        for shard in self.shards.iter() {
            let table = shard.0.lock().unwrap_or_else(PoisonError::into_inner);
            total = total.saturating_add(table.total);
            let full = table.slots.len() >= self.capacity;
            let floor = if full {
                table.count_at(0).unwrap_or(0)
            } else {
                0
            };
            floors = floors.saturating_add(floor);
            for slot in &table.slots {
                let entry = merged.entry(slot.key.clone()).or_insert_with(|| {
                    let hitter = HeavyHitter {
                        key: slot.key.to_string(),
                        rule: slot.rule.to_string(),
                        count: 0,
                        error: 0,
                    };
                    (hitter, 0, 0)
                });
                entry.0.count = entry.0.count.saturating_add(slot.count);
                entry.0.error = entry.0.error.saturating_add(slot.error);
                if slot.count > entry.1 {
                    entry.0.rule = slot.rule.to_string();
                    entry.1 = slot.count;
                }
                entry.2 = entry.2.saturating_add(floor);
            }
        }
        // A key absent from a full shard may have been counted there up to its floor.
        for (hitter, _, held) in merged.values_mut() {
            let absent = floors.saturating_sub(*held);
            hitter.count = hitter.count.saturating_add(absent);
            hitter.error = hitter.error.saturating_add(absent);
        }
        let mut top: Vec<HeavyHitter> = merged.into_values().map(|(hitter, ..)| hitter).collect();
        top.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        top.truncate(n);
        (top, total)
    }

    /// The most keys held in one shard.
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

    /// Space-Saving's guarantees, against the true counts of a skewed stream with many
    /// distinct keys (most denials evict): every key denied more than `total / capacity`
    /// times is held, each count is an upper bound whose `count - error` is a lower bound,
    /// the counts add up to the total, and the heap's root holds the smallest count.
    #[test]
    fn the_heap_keeps_space_savings_guarantees_under_a_flood_of_new_keys() {
        let capacity = 16;
        let sketch = TopDenied::new(capacity);
        let rule: Arc<str> = Arc::from("api.user");
        let mut truth: HashMap<String, u64> = HashMap::new();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..50_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // A quarter of denials go to 4 heavy keys, the rest to 5 000 others.
            let name = if x.is_multiple_of(4) {
                format!("heavy-{}", (x >> 8) % 4)
            } else {
                format!("noise-{}", (x >> 8) % 5_000)
            };
            sketch.record(&key(&name), &rule);
            *truth.entry(name).or_default() += 1;
        }
        let (top, total) = sketch.top(capacity);
        assert_eq!(total, 50_000);
        assert_eq!(top.len(), capacity);
        assert_eq!(top.iter().map(|h| h.count).sum::<u64>(), total);
        for (name, &count) in &truth {
            if count > total / capacity as u64 {
                assert!(
                    top.iter().any(|h| &h.key == name),
                    "{name} ({count}) is held"
                );
            }
        }
        for h in &top {
            let true_count = truth[&h.key];
            assert!(
                h.count >= true_count && h.count - h.error <= true_count,
                "{h:?} {true_count}"
            );
        }
        let heavy: Vec<_> = top.iter().take(4).map(|h| h.key.as_str()).collect();
        assert!(heavy.iter().all(|k| k.starts_with("heavy-")), "{heavy:?}");
        let at = thread_shard::this_thread(sketch.shards.len());
        let table = sketch.shards[at].0.lock().unwrap();
        let smallest = table.slots.iter().map(|s| s.count).min();
        assert_eq!(table.count_at(0), smallest);
        for (at, &id) in table.heap.iter().enumerate() {
            assert_eq!(table.place[id], at);
            for child in [2 * at + 1, 2 * at + 2] {
                if let Some(below) = table.count_at(child) {
                    assert!(table.count_at(at).unwrap() <= below);
                }
            }
        }
    }

    /// Two shards merged: a key held by both sums its counts; a key one full shard does not
    /// hold gets that shard's smallest count added to its count and its error (it may have
    /// been evicted there); a shard that is not full adds nothing.
    #[test]
    fn shards_merge_with_each_full_shards_floor() {
        let sketch = TopDenied::new(2);
        let rule: Arc<str> = Arc::from("r");
        {
            let mut a = sketch.shards[0].0.lock().unwrap();
            for name in ["x", "x", "x", "y", "y"] {
                a.record(2, &key(name), &rule);
            }
            let mut b = sketch.shards[1].0.lock().unwrap();
            for name in ["x", "z"] {
                b.record(2, &key(name), &rule);
            }
        }
        let (top, total) = sketch.top(10);
        assert_eq!(total, 7);
        let find = |k: &str| top.iter().find(|h| h.key == k).cloned().unwrap();
        // Both shards are full (2 keys each): shard 0's floor is 2 (y), shard 1's is 1.
        assert_eq!((find("x").count, find("x").error), (4, 0));
        assert_eq!((find("y").count, find("y").error), (3, 1));
        assert_eq!((find("z").count, find("z").error), (3, 2));
        assert_eq!(top[0].key, "x");
    }

    /// Two threads recording at once (each in its own shard, or in one if their indices
    /// meet): the merged answer keeps the guarantees against the true counts.
    #[test]
    fn denials_recorded_by_two_threads_merge_within_the_bound() {
        let capacity = 8;
        let sketch = TopDenied::new(capacity);
        let rule: Arc<str> = Arc::from("r");
        std::thread::scope(|scope| {
            for t in 0..2u32 {
                let (sketch, rule) = (&sketch, &rule);
                scope.spawn(move || {
                    for i in 0..5_000u32 {
                        sketch.record(&key(&format!("noise-{t}-{i}")), rule);
                        if i % 5 == 0 {
                            sketch.record(&key("attacker"), rule);
                        }
                    }
                });
            }
        });
        let (top, total) = sketch.top(capacity);
        assert_eq!(total, 12_000);
        let attacker = top.iter().find(|h| h.key == "attacker").unwrap();
        assert!(attacker.count >= 2_000 && attacker.count - attacker.error <= 2_000);
        assert!(attacker.error <= total / capacity as u64, "{attacker:?}");
        assert_eq!(top[0].key, "attacker");
    }
}
