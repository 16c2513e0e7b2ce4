//! The embedded in-memory store: the default, and the fastest way to a decision. Two paths,
//! one set of records (a (scope, key) is in exactly one of them):
//!
//! - **Lock-free**: a check under a rule whose state is one word (`word.rs`: GCRA, a token
//!   bucket that starts full, a fixed window, the two-window weighted estimate; no lockout)
//!   is decided by compare-and-swap without a lock: a hot key does not serialise, a denial
//!   is a plain read. An 8-byte key (`Key::from(u64)`) is one 16-byte slot, `[key | word]`
//!   (`compact.rs`); a key of 1 to 48 bytes of another length (an address as text, a user
//!   id) is one 64-byte slot, `[tag | word | key bytes]`, verified against the full key
//!   (`strings.rs`; not for a scope given a share of its own). One table per scope (rule)
//!   and kind, up to eight each, each sized for the rule's share of the capacity.
//! - **General** (`general.rs`): everything else, in shards, each a mutex over a table of
//!   full records found by their full (scope, key), held for one pure step, never across an
//!   await. An operation there on a key the lock-free table holds (a penalty, a block, an
//!   inspect, another algorithm) first moves the record over.
//!
//! Both run the same pure step (the algorithm's `Meter::check`, which `step::apply` runs),
//! so they decide as every other store does; the conformance suite, the governor
//! differential and the contention tests check it.
//!
//! Memory is bounded, whatever keys clients send: the general path holds at most
//! `capacity` records, and each lock-free table a fixed number of slots (16 bytes, or 64 for
//! string keys, × 1.25 per record of the rule's share, sized at the rule's first check and
//! made a 64 KiB chunk at a time as keys need them). Records expire when
//! equivalent to fresh and are swept when a shard fills up (or by [`MemoryStore::sweep`]).
//! When there is no room, a new key **evicts** a record that is not limited, least recently
//! used first, so a flood of one-off keys cannot lock new clients out. What eviction costs:
//! a key that was evicted starts fresh, so it may get at most one fresh window (its full
//! allowance once more); it was not limited, so nobody who was being held back is let go.
//!
//! - A limited, blocked or locked-out key (a check now would be denied, or it carries a
//!   block or lockout strikes), a concurrency or queue record, is **never** evicted:
//!   eviction would hand an attacker a fresh bucket.
//! - **Per-rule shares.** One rule may hold at most [`rule_share`](MemoryStoreBuilder::rule_share)
//!   percent of the capacity (default 50 %); past it, its new keys evict only its own
//!   records. A full store makes room from the rule holding the most records. So one
//!   rule's flood cannot take another rule's capacity. A rule is told apart by its
//!   parameters (two rules with identical parameters share one share), unless its scope
//!   was given a share of its own ([`scope_share`](MemoryStoreBuilder::scope_share): one
//!   share for every rule of that scope, whatever its parameters).
//! - A new key is refused only when no record may go: an eviction looks at every
//!   evictable record of a rule (the most recently used last) and at every rule.
//! - When no record may be evicted, **new keys fail closed** with [`StoreError::Full`](crate::StoreError::Full)
//!   (existing keys keep working) until some expire; [`MemoryStore::stats`] counts both
//!   evictions and refusals.

mod blocked;
mod builder;
mod check_all;
mod chunks;
mod compact;
mod general;
mod insert;
mod restore;
mod routing;
mod snapshot;
mod strings;
mod tables;
mod word;

#[cfg(test)]
mod tests;

pub use blocked::{BlockedKey, BlockedKeys};
pub use builder::MemoryStoreBuilder;
pub use routing::{MemoryStats, MemoryStore};
pub use snapshot::{ImportReport, SavedRecord, SnapshotError, StateSnapshot, MAX_SNAPSHOT_BYTES};
pub(crate) use word::WordMeter;

use crate::error::CheckError;
use crate::rule::Rule;
use crate::step::{Op, Outcome};

use super::{Decisions, ScopedKey, ScopedLimits, Store};

impl Store for MemoryStore {
    fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Outcome, CheckError>> + Send {
        std::future::ready(if key.is_scoped() {
            self.apply_scoped_now(key.key(), rule, op, now_ns)
        } else {
            self.apply_now(key.key(), rule, op, now_ns)
        })
    }

    fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Decisions, CheckError>> + Send {
        std::future::ready(if limits.is_scoped() {
            self.check_all_scoped_now(limits.as_slice(), cost, now_ns)
        } else {
            self.check_all_now(limits.as_slice(), cost, now_ns)
        })
    }
}
