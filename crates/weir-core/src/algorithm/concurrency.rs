//! Concurrency leases: a semaphore whose permits expire. Pure: maps (state, now, holder) to
//! (decision, next state). Equivalent Lua and memcached steps must agree with it.

use crate::decision::Decision;
use crate::time::until;

/// At most `max_leases` live leases per key. `acquire(holder, ttl)` takes a lease for
/// `holder` until `now + ttl`; `release(holder)` ends it. A lease that outlives its TTL frees
/// its slot, so a crashed holder cannot leak it.
///
/// Re-entrant: a holder that already has a live lease acquires again without taking a
/// second slot; its hold count goes up and its expiry moves to the later of the two. Each
/// release takes one hold off; the slot frees when the count reaches zero (or the lease
/// expires). `max_leases = 1` is a timed exclusive lock.
///
/// `retry_after` on a denial is when the oldest lease expires; a release may free a slot
/// sooner.
///
/// Rule change: live leases carry over; a lower `max_leases` lets none in until enough end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Concurrency {
    pub(crate) max_leases: u64,
}

/// One live lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseEntry {
    /// Who holds it.
    pub holder: Box<str>,
    /// Nested acquisitions not yet released.
    pub holds: u32,
    /// When it expires, ns since the Unix epoch.
    pub expires_ns: u64,
}

/// Concurrency state: the live leases, in acquisition order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConcurrencyState {
    /// The leases.
    pub leases: Vec<LeaseEntry>,
}

impl Concurrency {
    /// The longest holder id accepted, in bytes.
    pub const MAX_HOLDER_LEN: usize = 256;

    fn prune(state: &mut ConcurrencyState, now_ns: u64) {
        state.leases.retain(|l| l.expires_ns > now_ns);
    }

    fn live(state: &ConcurrencyState, now_ns: u64) -> u64 {
        let n = state
            .leases
            .iter()
            .filter(|l| l.expires_ns > now_ns)
            .count();
        u64::try_from(n).unwrap_or(u64::MAX)
    }

    fn last_expiry_ns(state: &ConcurrencyState) -> u64 {
        state.leases.iter().map(|l| l.expires_ns).max().unwrap_or(0)
    }

    /// Takes (or re-enters) a lease; `ttl_ns == 0` with `dry_run` reports only.
    pub(crate) fn acquire(
        &self,
        state: &mut ConcurrencyState,
        now_ns: u64,
        holder: &str,
        ttl_ns: u64,
        dry_run: bool,
    ) -> Decision {
        Self::prune(state, now_ns);
        let expires_ns = now_ns.saturating_add(ttl_ns);
        let live = Self::live(state, now_ns);
        if let Some(lease) = state.leases.iter_mut().find(|l| &*l.holder == holder) {
            if !dry_run {
                lease.holds = lease.holds.saturating_add(1);
                lease.expires_ns = lease.expires_ns.max(expires_ns);
            }
            let reset = until(Self::last_expiry_ns(state), now_ns);
            return Decision::allow(self.max_leases, self.max_leases.saturating_sub(live), reset);
        }
        if live < self.max_leases {
            if !dry_run {
                state.leases.push(LeaseEntry {
                    holder: holder.into(),
                    holds: 1,
                    expires_ns,
                });
            }
            let used = live + u64::from(!dry_run);
            let reset = until(Self::last_expiry_ns(state), now_ns);
            Decision::allow(self.max_leases, self.max_leases - used, reset)
        } else {
            let oldest = state
                .leases
                .iter()
                .map(|l| l.expires_ns)
                .min()
                .unwrap_or(now_ns);
            Decision::deny(
                self.max_leases,
                0,
                until(Self::last_expiry_ns(state), now_ns),
                until(oldest, now_ns),
            )
        }
    }

    /// Releases one hold of `holder`'s lease. Returns whether it held a live lease.
    pub(crate) fn release(&self, state: &mut ConcurrencyState, now_ns: u64, holder: &str) -> bool {
        Self::prune(state, now_ns);
        let Some(i) = state.leases.iter().position(|l| &*l.holder == holder) else {
            return false;
        };
        let lease = &mut state.leases[i];
        lease.holds = lease.holds.saturating_sub(1);
        if lease.holds == 0 {
            state.leases.remove(i);
        }
        true
    }

    pub(crate) fn used(&self, state: &ConcurrencyState, now_ns: u64) -> u64 {
        Self::live(state, now_ns)
    }

    pub(crate) fn fresh_at_ns(&self, state: &ConcurrencyState) -> u64 {
        Self::last_expiry_ns(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expired_leases_free_their_slot() {
        let c = Concurrency { max_leases: 1 };
        let mut s = ConcurrencyState::default();
        assert!(c.acquire(&mut s, 0, "a", 100, false).allowed);
        let d = c.acquire(&mut s, 50, "b", 100, false);
        assert!(!d.allowed);
        assert_eq!(d.retry_after.as_nanos(), 50);
        assert!(c.acquire(&mut s, 100, "b", 100, false).allowed);
    }

    #[test]
    fn reentrant_holds_are_counted() {
        let c = Concurrency { max_leases: 1 };
        let mut s = ConcurrencyState::default();
        assert!(c.acquire(&mut s, 0, "a", 100, false).allowed);
        assert!(c.acquire(&mut s, 0, "a", 100, false).allowed);
        assert!(c.release(&mut s, 0, "a"));
        assert!(!c.acquire(&mut s, 0, "b", 100, false).allowed);
        assert!(c.release(&mut s, 0, "a"));
        assert!(c.acquire(&mut s, 0, "b", 100, false).allowed);
        assert!(!c.release(&mut s, 0, "nobody"));
    }
}
