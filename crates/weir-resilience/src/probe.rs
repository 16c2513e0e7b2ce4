//! The PING probe of a [`FailoverStore`](crate::FailoverStore): once a part's circuit has
//! opened, a background task PINGs that part every `probe_interval` (under the timeout);
//! when it answers, the usage counted locally for that part's keys is pushed to it (if
//! `reconcile` is on) and its circuit closes. The only path that closes a circuit.

use std::sync::atomic::Ordering;
use std::sync::{Arc, PoisonError};

use weir_core::{Key, Op, Rule, Store};

use crate::failover::FailoverStore;

impl<S: Store> FailoverStore<S> {
    /// Starts the probe of `part`, unless it runs already.
    pub(crate) fn start_probe(&self, part: usize) {
        if self.breaker(part).probing.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime to probe from: go back to trying the store (with its timeout).
            self.breaker(part).probing.store(false, Ordering::Release);
            self.breaker(part).close();
            return;
        };
        let weak = Arc::downgrade(&self.inner);
        let interval = self.inner.config.probe_interval;
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(interval).await;
                let Some(inner) = weak.upgrade() else {
                    return; // the store was dropped
                };
                let store = FailoverStore { inner };
                let timeout = store.inner.config.timeout;
                let answered =
                    tokio::time::timeout(timeout, store.inner.primary.ping_part(part)).await;
                if matches!(answered, Ok(Ok(()))) {
                    store.reconcile(part).await;
                    let breaker = store.breaker(part);
                    breaker.probing.store(false, Ordering::Release);
                    if breaker.close() {
                        tracing::info!(part, "store answers again: decisions return to it");
                    }
                    return;
                }
            }
        });
    }

    /// Pushes the usage counted locally for `part`'s keys during its outage to the store,
    /// as penalties.
    async fn reconcile(&self, part: usize) {
        let pending: Vec<(Key, (Rule, u64, usize))> = {
            let mut map = self
                .inner
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let keys: Vec<Key> = map
                .iter()
                .filter(|(_, (_, _, p))| *p == part)
                .map(|(k, _)| k.clone())
                .collect();
            keys.into_iter()
                .filter_map(|k| map.remove_entry(&k))
                .collect()
        };
        let now_ns = self.inner.last_now_ns.load(Ordering::Relaxed);
        let mut pushed = 0u64;
        for (key, (rule, n, _)) in pending {
            let push = self.inner.primary.apply(
                weir_core::ScopedKey::plain(&key),
                &rule,
                Op::Penalty { n },
                now_ns,
            );
            if matches!(
                tokio::time::timeout(self.inner.config.timeout, push).await,
                Ok(Ok(_))
            ) {
                pushed += 1;
            }
        }
        if pushed > 0 {
            self.inner
                .reconciled_keys
                .fetch_add(pushed, Ordering::Relaxed);
            tracing::info!(
                keys = pushed,
                part,
                "outage usage reconciled into the store"
            );
        }
    }
}
