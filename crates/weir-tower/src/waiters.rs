//! The per-key bound of the queue mode: how many requests of one key are waiting for their
//! limit to allow them. A request that would exceed its policy's `max_queued` is refused at
//! once. The map is bounded too (at most `MAX_KEYS` keys waiting at once, whatever keys
//! clients send); past that, new keys are refused rather than queued.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use weir_core::Key;

/// Keys that may have waiters at once.
const MAX_KEYS: usize = 65_536;

#[derive(Debug, Default)]
pub(crate) struct Waiters {
    counts: Mutex<HashMap<Key, usize>>,
}

/// One waiting request; leaving (drop) frees its place.
pub(crate) struct Place {
    waiters: Arc<Waiters>,
    key: Key,
}

impl Waiters {
    /// A place in `key`'s queue, or `None` when `max_queued` already wait (or too many keys do).
    pub(crate) fn join(self: &Arc<Self>, key: &Key, max_queued: usize) -> Option<Place> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let full = counts.len() >= MAX_KEYS;
        let count = match counts.get_mut(key) {
            Some(count) => count,
            None if full => return None,
            None => counts.entry(key.clone()).or_insert(0),
        };
        if *count >= max_queued {
            return None;
        }
        *count += 1;
        Some(Place {
            waiters: Arc::clone(self),
            key: key.clone(),
        })
    }

    #[cfg(test)]
    fn waiting(&self, key: &Key) -> usize {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.get(key).copied().unwrap_or(0)
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        let mut counts = self
            .waiters
            .counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.key) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_max_queued_and_frees_places() {
        let waiters = Arc::new(Waiters::default());
        let key = Key::new("k").unwrap();
        let a = waiters.join(&key, 2).unwrap();
        let b = waiters.join(&key, 2).unwrap();
        assert!(waiters.join(&key, 2).is_none());
        drop(a);
        assert_eq!(waiters.waiting(&key), 1);
        let _c = waiters.join(&key, 2).unwrap();
        drop(b);
        assert_eq!(waiters.waiting(&key), 1);
    }
}
