//! The claiming check's hold on one key's slice (`mod.rs`'s protocol): while one check
//! claims from the store the key's other checks wait on its `Notify`; settling the claim,
//! or dropping it when the store call failed or the caller went away, clears it and wakes
//! them. Nothing here calls the store.

use std::sync::Arc;

use tokio::sync::Notify;

use super::slice::Slice;
use super::store::{lock, Shard};

/// The claiming check's hold on a key. Settling it (or dropping it, when the store call
/// failed or the caller went away) clears the claim and wakes the key's waiting checks.
pub(super) struct ClaimGuard<'a> {
    pub(super) shard: &'a Shard,
    pub(super) hash: u64,
    pub(super) notify: Arc<Notify>,
    pub(super) settled: bool,
}

impl ClaimGuard<'_> {
    pub(super) fn settle<T>(mut self, update: impl FnOnce(&mut Slice) -> T) -> Option<T> {
        let mut map = lock(self.shard);
        let answer = match map.get_mut(&self.hash) {
            Some(slice) if self.ours(slice) => {
                slice.claiming = None;
                Some(update(slice))
            }
            _ => None,
        };
        drop(map);
        self.settled = true;
        self.notify.notify_waiters();
        answer
    }

    fn ours(&self, slice: &Slice) -> bool {
        matches!(&slice.claiming, Some(n) if Arc::ptr_eq(n, &self.notify))
    }
}

impl Drop for ClaimGuard<'_> {
    fn drop(&mut self) {
        if self.settled {
            return;
        }
        let mut map = lock(self.shard);
        if let Some(slice) = map.get_mut(&self.hash) {
            if self.ours(slice) {
                slice.claiming = None;
            }
        }
        drop(map);
        self.notify.notify_waiters();
    }
}
