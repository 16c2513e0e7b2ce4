//! The memory store's blocked and locked-out keys, listed for an operator
//! (`GET /admin/keys/blocked`, `weir admin blocked`). Not on the path of a decision: it
//! reads the general tables one shard at a time, as the state file's export does, and
//! changes nothing. Only the general path can hold a block (a block or a lockout moves a
//! record off the lock-free path), so the lock-free tables are not read.
//!
//! The answer is bounded whatever the store holds: at most `limit` keys (those blocked
//! longest), with the count of every blocked key beside them.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::key::Key;

use super::MemoryStore;

/// One blocked or locked-out key of the memory store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockedKey {
    /// Blocked until this instant (the store clock's ns).
    pub blocked_until_ns: u64,
    /// The scope (rule) of the record ([`Rule::scope`](crate::Rule::scope)).
    pub scope: u64,
    /// The key.
    pub key: Key,
    /// Lockouts served and not yet forgiven (0 for a block set by hand on a fresh key).
    pub strikes: u32,
}

/// Ordered by the end of the block, then by key: the heap of [`MemoryStore::blocked`] keeps
/// the latest-ending ones.
impl Ord for BlockedKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.blocked_until_ns
            .cmp(&other.blocked_until_ns)
            .then_with(|| self.key.as_bytes().cmp(other.key.as_bytes()))
            .then_with(|| self.scope.cmp(&other.scope))
    }
}

impl PartialOrd for BlockedKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// A bounded list of blocked keys and how many there are in all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlockedKeys {
    /// At most the `limit` asked for, blocked longest first.
    pub keys: Vec<BlockedKey>,
    /// Every key blocked now (may be more than `keys.len()`).
    pub total: usize,
}

impl MemoryStore {
    /// The keys blocked at `now_ns` (by hand or by a lockout): at most `limit` of them, those
    /// blocked longest first, and the count of all. Locks one shard at a time; memory is
    /// `O(limit)` whatever the store holds.
    ///
    /// ```
    /// use weir_core::{Key, MemoryStore, Op, Rule};
    /// let store = MemoryStore::default();
    /// let rule = Rule::per_second(5).unwrap();
    /// let key = Key::new("alice").unwrap();
    /// store.apply_scoped_now(&key, &rule, Op::Block { duration_ns: 60_000_000_000 }, 0).unwrap();
    /// let blocked = store.blocked(1, 10);
    /// assert_eq!(blocked.total, 1);
    /// assert_eq!(blocked.keys[0].key, key);
    /// assert_eq!(blocked.keys[0].blocked_until_ns, 60_000_000_000);
    /// ```
    pub fn blocked(&self, now_ns: u64, limit: usize) -> BlockedKeys {
        let inner = &*self.inner;
        // The `limit` latest-ending blocks seen so far; the top is the earliest of them.
        let mut kept: BinaryHeap<Reverse<BlockedKey>> = BinaryHeap::new();
        let mut total = 0usize;
        for i in 0..inner.shards.len() {
            let table = inner.lock(i);
            for entry in table.entries() {
                let until = entry.record.blocked_until_ns();
                if until <= now_ns || !entry.record.is_live(now_ns) {
                    continue;
                }
                total = total.saturating_add(1);
                if limit == 0 {
                    continue;
                }
                if kept.len() == limit {
                    match kept.peek() {
                        Some(Reverse(earliest)) if earliest.blocked_until_ns < until => {
                            kept.pop();
                        }
                        _ => continue,
                    }
                }
                kept.push(Reverse(BlockedKey {
                    blocked_until_ns: until,
                    scope: entry.scope,
                    key: entry.key.clone(),
                    strikes: entry.record.guard.as_ref().map_or(0, |g| g.strikes),
                }));
            }
        }
        let mut keys: Vec<BlockedKey> = kept.into_iter().map(|Reverse(k)| k).collect();
        keys.sort_by(|a, b| b.cmp(a));
        BlockedKeys { keys, total }
    }
}

#[cfg(test)]
mod tests {
    use crate::{Key, Lockout, MemoryStore, Op, Rule};
    use std::time::Duration;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn blocked_and_locked_out_keys_are_listed_longest_first_and_bounded() {
        let store = MemoryStore::default();
        let rule = Rule::per_second(5).unwrap();
        for i in 1..=5u64 {
            let key = Key::new(format!("k{i}")).unwrap();
            let op = Op::Block {
                duration_ns: i * 10 * SECOND,
            };
            store.apply_scoped_now(&key, &rule, op, 0).unwrap();
        }
        // A lockout: the second attempt over a limit of one locks the key for 45 s.
        let locked = Rule::fixed_window(1, Duration::from_secs(1))
            .unwrap()
            .with_lockout(Lockout::new(Duration::from_secs(45)).unwrap());
        let key = Key::new("mallory").unwrap();
        for _ in 0..2 {
            store
                .apply_scoped_now(&key, &locked, Op::Check { cost: 1 }, 0)
                .unwrap();
        }
        // A key merely used is not listed.
        store
            .apply_scoped_now(&Key::new("bob").unwrap(), &rule, Op::Check { cost: 1 }, 0)
            .unwrap();

        let all = store.blocked(1, 100);
        assert_eq!(all.total, 6);
        let names: Vec<String> = all.keys.iter().map(|k| k.key.to_string()).collect();
        assert_eq!(names, ["k5", "mallory", "k4", "k3", "k2", "k1"]);
        assert_eq!(all.keys[1].strikes, 1);
        assert_eq!(all.keys[1].scope, locked.scope());

        let two = store.blocked(1, 2);
        assert_eq!(two.total, 6, "the count is of all, the list bounded");
        let names: Vec<String> = two.keys.iter().map(|k| k.key.to_string()).collect();
        assert_eq!(names, ["k5", "mallory"]);

        // Blocks that have ended are not listed.
        assert_eq!(store.blocked(45 * SECOND, 100).total, 1);
        assert!(store.blocked(50 * SECOND, 100).keys.is_empty());
    }
}
