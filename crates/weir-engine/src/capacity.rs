//! What the engine remembers of a full memory store: when new keys were last refused, how
//! many, and when that was last logged. The decision path ([`Engine`](crate::Engine))
//! records each refusal; `/readyz` reports the store degraded while refusals are recent;
//! the log gets one WARN per [`LOG_EVERY`] with the count of refusals since the last one.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// At most one WARN about a full store per this span.
pub const LOG_EVERY: Duration = Duration::from_secs(10);
/// `/readyz` reports the store degraded for this long after the last refusal.
pub const DEGRADED_FOR: Duration = Duration::from_secs(10);

/// Refusals of new keys by a full memory store.
#[derive(Debug, Default)]
pub struct CapacityWatch {
    /// When the last refusal happened (ns since the epoch; 0: never).
    last_ns: AtomicU64,
    /// Refusals since the last WARN.
    unlogged: AtomicU64,
    /// When the last WARN was written (0: never).
    logged_ns: AtomicU64,
}

impl CapacityWatch {
    /// Records one refusal at `now_ns`; writes a WARN if none was written in the last
    /// [`LOG_EVERY`].
    pub fn refused(&self, now_ns: u64, capacity: usize, rule: &str) {
        self.last_ns.store(now_ns.max(1), Ordering::Relaxed);
        let unlogged = self.unlogged.fetch_add(1, Ordering::Relaxed) + 1;
        let logged = self.logged_ns.load(Ordering::Relaxed);
        let due = logged == 0 || now_ns.saturating_sub(logged) >= nanos(LOG_EVERY);
        if due
            && self
                .logged_ns
                .compare_exchange(logged, now_ns.max(1), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.unlogged.store(0, Ordering::Relaxed);
            tracing::warn!(
                capacity,
                rule,
                refused = unlogged,
                "memory store full of limited keys: new keys are refused by their rules' \
                 failure policy (raise --memory-capacity, or look for a key flood)"
            );
        }
    }

    /// Whether a refusal happened within [`DEGRADED_FOR`] before `now_ns`.
    pub fn degraded(&self, now_ns: u64) -> bool {
        let last = self.last_ns.load(Ordering::Relaxed);
        last != 0 && now_ns.saturating_sub(last) < nanos(DEGRADED_FOR)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    #[test]
    fn degraded_while_refusals_are_recent() {
        let watch = CapacityWatch::default();
        assert!(!watch.degraded(100 * SEC));
        watch.refused(100 * SEC, 10, "r");
        assert!(watch.degraded(105 * SEC));
        assert!(!watch.degraded(111 * SEC));
    }
}
