//! The keys blocked now, by hand or by a lockout, for the admin API's
//! `GET /admin/keys/blocked` and `weir admin blocked`. Not on the path of a decision: it
//! reads the memory store's records ([`MemoryStore::blocked`](weir_core::MemoryStore::blocked))
//! and names each record's rule from the rules in force.
//!
//! **Only the memory store can list them.** A network store (Redis, memcached) holds the
//! blocks of every instance under hashed, scoped keys, and listing them would mean scanning
//! the whole keyspace of a shared server from a request handler; what one instance saw is
//! not the answer an operator asks for either (another instance's lockouts would be
//! missing, silently). So with a network store [`Engine::blocked_keys`] answers `None` and the
//! admin API refuses the call, saying so; `inspect` answers for one key on every store.

use std::collections::HashMap;

use serde::Serialize;
use weir_core::Clock as _;

use crate::engine::Engine;

/// One blocked or locked-out key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BlockedEntry {
    /// The limiter key (as `/admin/top-denied` and `inspect` show it).
    pub key: String,
    /// The id of the rule it is blocked under (every id, comma-separated, when rules share
    /// one record scope); `None` when no rule in force has its scope (a limit override
    /// from a request, or a rule since removed).
    pub rule: Option<String>,
    /// How long it stays blocked, in milliseconds (rounded up).
    pub blocked_for_ms: u64,
    /// Lockouts served and not yet forgiven (0 for a block set by hand on a fresh key).
    pub strikes: u32,
}

/// At most the `limit` asked for and the count of all blocked keys.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BlockedList {
    /// Blocked longest first.
    pub keys: Vec<BlockedEntry>,
    /// Every key blocked now (may be more than `keys.len()`).
    pub total: usize,
}

impl Engine {
    /// The keys blocked now, at most `limit` (blocked longest first), and how many in all;
    /// `None` when the store is not the memory store (see the module docs: a network store
    /// cannot list them).
    pub fn blocked_keys(&self, limit: usize) -> Option<BlockedList> {
        let store = self.store().memory()?;
        let now_ns = self.limiter().clock().now_ns();
        let found = store.blocked(now_ns, limit);
        let snapshot = self.rules().snapshot();
        let mut by_scope: HashMap<u64, String> = HashMap::new();
        for info in snapshot.rules.rules() {
            if let Some(rule) = info.rule() {
                by_scope
                    .entry(rule.scope())
                    .and_modify(|ids| {
                        ids.push(',');
                        ids.push_str(&info.id);
                    })
                    .or_insert_with(|| info.id.to_string());
            }
        }
        let keys = found
            .keys
            .into_iter()
            .map(|k| BlockedEntry {
                key: k.key.to_string(),
                rule: by_scope.get(&k.scope).cloned(),
                blocked_for_ms: ceil_ms(k.blocked_until_ns.saturating_sub(now_ns)),
                strikes: k.strikes,
            })
            .collect();
        Some(BlockedList {
            keys,
            total: found.total,
        })
    }
}

/// Nanoseconds as whole milliseconds, rounded up (a block of 1 ns left is not "0 ms").
fn ceil_ms(ns: u64) -> u64 {
    ns.div_ceil(1_000_000)
}
