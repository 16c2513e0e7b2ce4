//! The insert path of a lock-free check: a key its scope's table (`compact.rs` for 8-byte
//! keys, `strings.rs` for others) does not hold yet is given a slot there (under the key's
//! stripe lock, after asking the general table, which may hold it), or else decided by the
//! general path. Out of the checks' own path
//! (`routing.rs`): a key is new once and checked many times.

use std::sync::TryLockError;

use crate::error::CheckError;
use crate::key::Key;
use crate::rule::Rule;
use crate::step::{Op, Outcome};

use super::compact::{self, Claimed, Found};
use super::routing::Inner;
use super::strings::{self, Probe};
use super::word::WordMeter;

impl Inner {
    /// The insert path of a check the lock-free table did not find (`word` the key's 8
    /// bytes, `meter` the rule's): under the key's stripe lock (which orders inserts of one
    /// key) the table is asked again, then, if the general table does not hold the key,
    /// a slot is claimed; the general path takes the rest (a key it holds, a peek, no slot
    /// to be had). Out of line: a key is new once, checked many times, and the checks' own
    /// path stays short.
    #[cold]
    #[inline(never)]
    pub(super) fn insert(
        &self,
        table: &compact::Table,
        (hash, scope, key): (u64, u64, &Key),
        (word, meter): (u64, &WordMeter),
        rule: &Rule,
        cost: u64,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let _stripe = table.stripe(hash);
        if let Found::Decided(d) = table.check(hash, word, meter, cost, now_ns) {
            return Ok(Outcome::Decision(d));
        }
        let held = self.shard_index(hash);
        let mut shard = self.lock(held);
        if cost > 0 && shard.get(hash, scope, key).is_none() {
            // Making room moves another key's record within the table: that key's shard is
            // held meanwhile (this one is already; another is only tried, never waited
            // for, so two inserts never wait on each other).
            let exclusive = |other: u64| {
                let other_hash = self.hash_bytes(scope, &other.to_le_bytes());
                let index = self.shard_index(other_hash);
                if index == held {
                    return Some((other_hash, None));
                }
                let guard = match self.shards.get(index)?.0.try_lock() {
                    Ok(guard) => guard,
                    Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
                    Err(TryLockError::WouldBlock) => return None,
                };
                Some((other_hash, Some(guard)))
            };
            if let Claimed::Decided(d) = table.claim(hash, word, (meter, cost, now_ns), exclusive) {
                return Ok(Outcome::Decision(d));
            }
        }
        let op = Op::Check { cost };
        self.apply_general(&mut shard, (hash, scope, key), rule, &op, now_ns)
    }

    /// [`insert`](Self::insert) for a string key (`probe` its bytes, `meter` the rule's):
    /// the same order of locks and questions; no record of another key moves to make room
    /// (`strings.rs`), so no other lock is taken.
    #[cold]
    #[inline(never)]
    pub(super) fn insert_string(
        &self,
        table: &strings::Table,
        (hash, scope, key): (u64, u64, &Key),
        (probe, meter): (&Probe, &WordMeter),
        rule: &Rule,
        cost: u64,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let _stripe = table.stripe(hash);
        if let Found::Decided(d) = table.check(hash, probe, meter, cost, now_ns) {
            return Ok(Outcome::Decision(d));
        }
        let mut shard = self.lock(self.shard_index(hash));
        if cost > 0 && shard.get(hash, scope, key).is_none() {
            if let Claimed::Decided(d) = table.claim(hash, probe, (meter, cost, now_ns)) {
                return Ok(Outcome::Decision(d));
            }
        }
        let op = Op::Check { cost };
        self.apply_general(&mut shard, (hash, scope, key), rule, &op, now_ns)
    }
}
