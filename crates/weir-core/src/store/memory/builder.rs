//! Building a [`MemoryStore`]: its capacity, shards and per-rule shares (how much of the
//! capacity one rule, or one scope, may hold), fixed for the store's life. Not on the
//! path of a decision; `routing.rs` is.

use std::hash::BuildHasher;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use super::general::{Limits, ScopeShare};
use super::routing::{Inner, MemoryStore, Shard};
use super::tables::Tables;

/// The default capacity in keys.
const DEFAULT_CAPACITY: usize = 1 << 20;
/// The default number of shards (a power of two).
const DEFAULT_SHARDS: usize = 64;
/// The default share of the capacity one rule may hold, in percent.
const DEFAULT_RULE_SHARE: u8 = 50;
/// Shards hold at least this many keys each (fewer shards for a small capacity), so that
/// per-rule shares and eviction have room to work.
const MIN_KEYS_PER_SHARD: usize = 64;

/// Builds a [`MemoryStore`].
#[derive(Debug, Clone)]
pub struct MemoryStoreBuilder {
    capacity: usize,
    shards: usize,
    rule_share: u8,
    /// (scope, percent): scopes given a share of their own.
    scope_shares: Vec<(u64, u8)>,
}

impl MemoryStoreBuilder {
    /// The most keys held at once (default 1 048 576). Split evenly over the shards.
    pub fn capacity(mut self, keys: usize) -> Self {
        self.capacity = keys.max(1);
        self
    }

    /// The number of shards, rounded up to a power of two (default 64).
    pub fn shards(mut self, shards: usize) -> Self {
        self.shards = shards.clamp(1, 1 << 16).next_power_of_two();
        self
    }

    /// The most one rule may hold, in percent of the capacity (1 to 100, default 50): past
    /// it, the rule's new keys evict its own unlimited records or are refused, so a flood
    /// under one rule leaves the rest of the capacity to the others.
    pub fn rule_share(mut self, percent: u8) -> Self {
        self.rule_share = percent.clamp(1, 100);
        self
    }

    /// Gives the records of one scope (every rule named `name` shares it: see
    /// [`Rule::scope`](crate::Rule::scope)) a share of their own, `percent` of the capacity (1 to 100), whatever
    /// the parameters of the rules checking them. Without it, each set of parameters is a
    /// rule of its own with the [`rule_share`](Self::rule_share): a scope whose callers pick
    /// the parameters (the server's limit overrides, named alike whatever limit a request
    /// names) could then take a whole rule's share once per set. Past its share, the
    /// scope's new keys evict its own unlimited records or are refused, and nothing else's.
    /// Bounds the general path, and the scope's string keys stay on it (the lock-free
    /// tables are sized for a rule's share; its 8-byte keys may take one).
    ///
    /// ```
    /// use std::time::Duration;
    /// use weir_core::{Key, Limiter, ManualClock, MemoryStore, Rule};
    /// let scope = Rule::per_second(1)?.named("overrides").scope();
    /// let store = MemoryStore::builder().capacity(6400).scope_share(scope, 10).build();
    /// let limiter = Limiter::new(store.clone(), ManualClock::default());
    /// let mut refused = 0;
    /// for i in 0..2000u64 {
    ///     // Each request names its own limit (1 to 7 an hour), then goes over it.
    ///     let rule = Rule::fixed_window(1 + i % 7, Duration::from_secs(3600))?.named("overrides");
    ///     let key = Key::new(format!("override-{i}"))?;
    ///     for _ in 0..8 {
    ///         if limiter.check_now(&key, &rule, 1).is_err() {
    ///             refused += 1; // StoreError::Full: its share holds only limited keys
    ///             break;
    ///         }
    ///     }
    /// }
    /// assert!(store.len() <= 640, "one share of 10 %: {}", store.len());
    /// assert!(refused > 1000);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn scope_share(mut self, scope: u64, percent: u8) -> Self {
        self.scope_shares.retain(|(s, _)| *s != scope);
        self.scope_shares.push((scope, percent.clamp(1, 100)));
        self
    }

    /// The store.
    pub fn build(self) -> MemoryStore {
        let most = (self.capacity / MIN_KEYS_PER_SHARD).max(1);
        // The largest power of two not above `most` (both are powers of two then).
        let shards = self
            .shards
            .min(1 << (usize::BITS - 1 - most.leading_zeros()));
        let per_shard_capacity = self.capacity.div_ceil(shards);
        let per_shard_rule_cap = (per_shard_capacity * usize::from(self.rule_share))
            .div_ceil(100)
            .max(1);
        let rule_records = (self.capacity * usize::from(self.rule_share)).div_ceil(100);
        let hasher = foldhash::quality::RandomState::default();
        let scope_shares = self
            .scope_shares
            .iter()
            .map(|&(scope, percent)| ScopeShare {
                scope,
                key: hasher.hash_one(("scope share", scope)),
                per_shard_cap: (per_shard_capacity * usize::from(percent))
                    .div_ceil(100)
                    .max(1),
            })
            .collect();
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..shards).map(|_| Shard(Mutex::default())).collect(),
                shard_mask: u64::try_from(shards - 1).unwrap_or(0),
                limits: Limits {
                    per_shard_capacity,
                    per_shard_rule_cap,
                    scope_shares,
                    capacity: self.capacity,
                    evictions: AtomicU64::new(0),
                    refusals: AtomicU64::new(0),
                },
                hasher,
                compact: Tables::new(rule_records),
                strings: Tables::new(rule_records),
                #[cfg(test)]
                collide: false,
            }),
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::builder().build()
    }
}

impl MemoryStore {
    /// A builder (capacity, shards).
    pub fn builder() -> MemoryStoreBuilder {
        MemoryStoreBuilder {
            capacity: DEFAULT_CAPACITY,
            shards: DEFAULT_SHARDS,
            rule_share: DEFAULT_RULE_SHARE,
            scope_shares: Vec::new(),
        }
    }
}
