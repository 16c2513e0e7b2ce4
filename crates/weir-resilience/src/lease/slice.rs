//! One key's slice: the units this instance claimed from the store and has not spent, when
//! they expire, a cached denial, and the demand that sizes the next claim. Pure state
//! changes under the shard lock of `mod.rs`; nothing here waits or calls the store.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use weir_core::{Decision, Key};

/// Which record a slice stands for: the key, and the rule's scope when the caller used
/// a scoped key ([`weir_core::ScopedKey::scoped`]).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Id {
    pub(super) key: Key,
    pub(super) scope: u64,
    pub(super) scoped: bool,
}

/// What this instance holds for one key.
#[derive(Debug)]
pub(super) struct Slice {
    pub(super) id: Id,
    /// Units claimed and not yet spent.
    units: u64,
    /// When they expire (granted at `granted_ns`, live one TTL).
    expires_ns: u64,
    /// Bumped by every grant, so units given back after an all-or-nothing denial go to the
    /// slice they came from, never to a newer one.
    pub(super) generation: u64,
    /// The store's `remaining` after the last grant, and when the key would be fresh.
    store_remaining: u64,
    reset_at_ns: u64,
    limit: u64,
    /// A denial the store gave to the last claim, answered here until it runs out.
    denied: Option<(u64, Decision)>,
    /// Set while one check claims from the store; the key's other checks wait on it.
    pub(super) claiming: Option<Arc<Notify>>,
    /// This instance denied a check of the key since the last grant: it wants more than
    /// it gets, so the next slice may be as large as the limit (it will not sit idle).
    pub(super) overloaded: bool,
    /// The last claim left the store with fewer units than a partial claim takes: the
    /// next asks for at most one lifetime's units (what the wait after it was for).
    pub(super) short: bool,
    /// Units asked for since `since_ns`: the local demand, measured over at least one
    /// slice lifetime.
    demand: u64,
    since_ns: u64,
}

impl Slice {
    pub(super) fn new(id: Id, now_ns: u64) -> Self {
        Self {
            id,
            units: 0,
            expires_ns: 0,
            generation: 0,
            store_remaining: 0,
            reset_at_ns: 0,
            limit: 0,
            denied: None,
            claiming: None,
            overloaded: false,
            short: false,
            demand: 0,
            since_ns: now_ns,
        }
    }

    /// Whether nothing would be lost by dropping it: no live units, no live denial, no claim.
    pub(super) fn is_idle(&self, now_ns: u64) -> bool {
        self.claiming.is_none()
            && (self.units == 0 || self.expires_ns <= now_ns)
            && self.denied.is_none_or(|(until, _)| until <= now_ns)
    }

    /// Units held now (live ones only).
    pub(super) fn live_units(&self, now_ns: u64) -> u64 {
        if now_ns < self.expires_ns {
            self.units
        } else {
            0
        }
    }

    /// Spends `cost` units of a live slice, if it holds them.
    pub(super) fn spend(&mut self, cost: u64, now_ns: u64) -> Option<Decision> {
        if self.live_units(now_ns) < cost {
            return None;
        }
        self.units -= cost;
        self.demand = self.demand.saturating_add(cost);
        Some(self.allowed(now_ns))
    }

    /// The cached denial, while it lasts.
    pub(super) fn denial(&mut self, cost: u64, now_ns: u64) -> Option<Decision> {
        let (until_ns, d) = self.denied?;
        if until_ns <= now_ns {
            self.denied = None;
            return None;
        }
        self.demand = self.demand.saturating_add(cost);
        self.overloaded = true;
        Some(Decision {
            retry_after: Duration::from_nanos(until_ns - now_ns),
            reset_after: Duration::from_nanos(self.reset_at_ns.saturating_sub(now_ns)),
            ..d
        })
    }

    /// How many units to claim for a request of `cost`: the demand since the last grant,
    /// as a rate, times the slice's lifetime, between `cost` and `cap`. A new or quiet key
    /// claims just its cost; a busy one claims what it will spend in a lifetime.
    pub(super) fn want(&self, cost: u64, now_ns: u64, ttl_ns: u64, cap: u64) -> u64 {
        if self.demand == 0 {
            return cost;
        }
        let elapsed = now_ns.saturating_sub(self.since_ns).max(1);
        let rate_units = u128::from(self.demand) * u128::from(ttl_ns) / u128::from(elapsed);
        u64::try_from(rate_units)
            .unwrap_or(u64::MAX)
            .clamp(cost, cap.max(cost))
    }

    /// The store granted `granted` units, of which this request spends `cost`. `back`:
    /// how long until the store has that many units again, when the grant said so
    /// ([`Rule::retry_after_allowed`](weir_core::Rule::retry_after_allowed)); once the slice
    /// is spent, the key's checks are denied here until then rather than each asking the
    /// store for a claim it would refuse.
    pub(super) fn grant(
        &mut self,
        granted: u64,
        cost: u64,
        store: &Decision,
        back: Option<Duration>,
        now_ns: u64,
        ttl_ns: u64,
    ) -> Decision {
        self.units = granted - cost;
        self.expires_ns = now_ns.saturating_add(ttl_ns);
        self.generation = self.generation.wrapping_add(1);
        self.store_remaining = store.remaining;
        self.reset_at_ns = now_ns.saturating_add(nanos(store.reset_after));
        self.limit = store.limit;
        self.overloaded = false;
        self.short = back.is_some();
        self.denied = back.map(|wait| {
            let denial = Decision {
                allowed: false,
                remaining: 0,
                retry_after: wait,
                ..*store
            };
            (now_ns.saturating_add(nanos(wait)), denial)
        });
        // The demand is measured over at least one lifetime, so a quiet key's few
        // requests are not read as a burst.
        if now_ns.saturating_sub(self.since_ns) >= ttl_ns {
            self.demand = 0;
            self.since_ns = now_ns;
        }
        self.demand = self.demand.saturating_add(cost);
        self.allowed(now_ns)
    }

    /// The store denied the claim: answer the key's checks with its denial until the units
    /// claimed are back (`retry_after`), or for `most` if that is sooner (then the next
    /// check claims again, perhaps less). Unspent units of the old slice are dropped: they
    /// were granted earlier and must not outlive their lifetime. Returns the denial.
    pub(super) fn deny(
        &mut self,
        cost: u64,
        store: &Decision,
        most: Duration,
        now_ns: u64,
    ) -> Decision {
        self.units = 0;
        self.demand = self.demand.saturating_add(cost);
        self.overloaded = true;
        self.reset_at_ns = now_ns.saturating_add(nanos(store.reset_after));
        let wait = store.retry_after.min(most);
        let denial = Decision {
            retry_after: wait,
            ..*store
        };
        self.denied = (!wait.is_zero()).then(|| (now_ns.saturating_add(nanos(wait)), denial));
        denial
    }

    /// Puts back `cost` units taken from generation `generation`, if that slice is still
    /// the one held and still live.
    pub(super) fn give_back(&mut self, generation: u64, cost: u64, now_ns: u64) {
        if self.generation == generation && now_ns < self.expires_ns {
            self.units = self.units.saturating_add(cost);
        }
    }

    fn allowed(&self, now_ns: u64) -> Decision {
        Decision {
            allowed: true,
            limit: self.limit,
            remaining: self
                .units
                .saturating_add(self.store_remaining)
                .min(self.limit),
            reset_after: Duration::from_nanos(self.reset_at_ns.saturating_sub(now_ns)),
            retry_after: Duration::ZERO,
            delay: Duration::ZERO,
        }
    }
}

pub(super) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice() -> Slice {
        let id = Id {
            key: Key::new("k").unwrap(),
            scope: 0,
            scoped: false,
        };
        Slice::new(id, 0)
    }

    fn store(remaining: u64) -> Decision {
        Decision {
            allowed: true,
            limit: 100,
            remaining,
            reset_after: Duration::from_secs(1),
            retry_after: Duration::ZERO,
            delay: Duration::ZERO,
        }
    }

    #[test]
    fn units_are_spent_until_gone_or_expired() {
        let mut s = slice();
        let d = s.grant(3, 1, &store(50), None, 0, 1000);
        assert_eq!(d.remaining, 52);
        assert!(s.spend(1, 10).is_some());
        assert!(s.spend(1, 999).is_some());
        assert!(s.spend(1, 999).is_none(), "all three spent");
        s.grant(3, 1, &store(50), None, 2000, 1000);
        assert!(s.spend(1, 3000).is_none(), "expired at 3000");
        assert_eq!(s.live_units(3000), 0);
    }

    #[test]
    fn the_next_claim_follows_the_demand() {
        let mut s = slice();
        assert_eq!(s.want(1, 0, 1000, 50), 1, "a new key claims its cost");
        s.grant(1, 1, &store(50), None, 0, 1000);
        // 10 units asked over 100 ns: 100 per lifetime, capped at 50.
        s.demand = 10;
        assert_eq!(s.want(1, 100, 1000, 50), 50);
        // 2 units over 1000 ns: 2 per lifetime.
        s.demand = 2;
        assert_eq!(s.want(1, 1000, 1000, 50), 2);
        assert_eq!(s.want(5, 1000, 1000, 50), 5, "never below the cost");
    }

    #[test]
    fn a_denied_claim_is_answered_until_its_retry_after() {
        let mut s = slice();
        let denied = Decision {
            allowed: false,
            retry_after: Duration::from_nanos(500),
            ..store(0)
        };
        s.deny(1, &denied, Duration::from_secs(1), 100);
        assert_eq!(
            s.denial(1, 200).unwrap().retry_after,
            Duration::from_nanos(400)
        );
        assert!(s.denial(1, 600).is_none());
        assert!(s.is_idle(600));
    }

    #[test]
    fn units_go_back_only_to_their_own_live_slice() {
        let mut s = slice();
        s.grant(2, 1, &store(0), None, 0, 1000);
        let generation = s.generation;
        s.spend(1, 1).unwrap();
        s.give_back(generation, 1, 2);
        assert_eq!(s.live_units(2), 1);
        s.spend(1, 3).unwrap();
        s.grant(2, 1, &store(0), None, 4, 1000);
        s.give_back(generation, 1, 5);
        assert_eq!(
            s.live_units(5),
            1,
            "an older generation's unit is not added"
        );
    }
}
