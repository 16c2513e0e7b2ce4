//! [`LeasedStore`] itself: its shards of slices, the routing of each operation (a leased
//! rule's check is served from a slice; exact rules and every other operation pass
//! straight through to the store below) and the claim of a new slice. Where it sits and
//! the protocol's bounds: the module docs of `lease/` and [`LeasedStore`].

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;
use weir_core::{
    CheckError, Decision, Decisions, Key, Mode, Op, Outcome, Rule, ScopedKey, ScopedLimits, Store,
    StoreError,
};

use crate::presence::InstanceCount;

use super::claim::ClaimGuard;
use super::config::LeaseConfig;
use super::slice::{Id, Slice};

const SHARDS: usize = 16;

pub(super) type Shard = Mutex<HashMap<u64, Slice>>;

/// Counters for metrics and benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LeaseStats {
    /// Checks of leased rules answered from a slice (allowed, no store call).
    pub local_allowed: u64,
    /// Checks of leased rules answered by a cached denial (no store call).
    pub local_denied: u64,
    /// Claims sent to the store.
    pub claims: u64,
    /// Claims the store refused.
    pub claims_denied: u64,
    /// Units granted by the store.
    pub units_granted: u64,
    /// Checks of leased rules decided exactly because no slice could be held (table full).
    pub bypassed: u64,
    /// Keys holding a slice now.
    pub slices: usize,
}

/// A [`Store`] that decides [leased](weir_core::Mode::Leased) rules locally from slices
/// claimed from `S`. Bounded memory: at most [`LeaseConfig::capacity`] keys hold a slice.
///
/// # The protocol
/// A check of `cost` on a leased rule spends `cost` units of this instance's slice for its
/// key. When the slice is empty or expired, one check claims a new one: a single atomic
/// check of `want` units in the store (the same step as any check, so the store counts the
/// units as used from the moment they are granted), while the key's other checks wait for
/// it. `want` follows the key's local demand (units asked per slice lifetime), between the
/// request's cost and [`LeaseConfig::cap`]. If the store refuses `want` but has at least
/// `cost` left, a second claim takes what is left (small slices near the limit). If it
/// refuses, its denial is answered locally until its `retry_after`. Unspent units expire
/// with the slice; none go back (a fixed window's reward would land in a later window).
///
/// # The bounds
/// - **Over-admission.** Every unit admitted was granted by the store at most one slice
///   lifetime `ttl` ([`LeaseConfig::ttl_ns`]) earlier, and the store grants no more than the
///   rule allows. So over any interval of length `t`, all instances together admit at
///   most what the exact rule admits over `t + ttl`. With the defaults (`ttl` = a tenth of
///   the window, at most 10 s), a rule of `limit` per window `W` admits at most what it
///   would over `1.1 W`: for GCRA and the buckets, `burst + rate × 1.1 W`.
/// - **Under-admission.** Units sit idle only in slices: at any moment at most
///   `instances × cap` units of a key are claimed and unspent (`cap` is at most a quarter
///   of the limit by default), and they are back in the store's count once their slice
///   ages out of the rule's window. An instance that has been turning the key's requests
///   away since its last slice may claim up to the whole limit (its demand spends it; this
///   is what keeps store calls low under overload): if its demand then stops, those units
///   sit idle for at most one lifetime.
/// - **At the rule's rate under overload.** A grant that leaves the store short of a
///   partial claim is followed by local denials only until the units the rule gives back
///   over one lifetime are back ([`LeaseConfig::per_lifetime`]; at most one lifetime for
///   GCRA and the buckets, a fixed window's end), and the next claim asks for those. A
///   refused claim takes what is left if that is at least half this instance's part of a
///   lifetime's units; otherwise it is answered locally for at most half a lifetime, less
///   than the wait after a grant, so instances at overload take turns. No key goes longer
///   than the exact rule's own gaps plus one lifetime without an admission, and a
///   saturated key gets at least 90 % of the exact rule (`tests/lease_bounds.rs`, and on
///   Redis `weir-engine/tests/leased_redis.rs`), for about one store call per lifetime
///   and instance.
/// - **Outage.** Slices keep being spent while the store is away; the next claim fails and
///   the store below (usually a [`FailoverStore`](crate::FailoverStore)) applies the rule's
///   failure policy.
///
/// The sliding log, the leaky-bucket queue, concurrency leases and rules with a lockout
/// cannot lease ([`Rule::leased`] says why). `reward`, `penalty`, `block`, `unblock` and
/// `reset` drop the key's slice here and go to the store; `inspect` goes to the store and
/// counts units held in slices as used.
///
/// ```
/// use std::time::Duration;
/// use weir_core::{Key, Limiter, MemoryStore, Rule, SystemClock};
/// use weir_resilience::{LeaseConfig, LeasedStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// // In production the inner store is shared (Redis); any Store works.
/// let store = LeasedStore::new(MemoryStore::default(), LeaseConfig::default());
/// let limiter = Limiter::new(store, SystemClock::new());
/// let rule = Rule::gcra(1000, Duration::from_secs(1), 1000)?.leased()?;
/// let key = Key::new("api:alice")?;
/// for _ in 0..10 {
///     assert!(limiter.check(&key, &rule, 1).await?.allowed);
/// }
/// // The first check claimed one unit; the busier the key, the larger its next slice.
/// assert!(limiter.store().stats().claims < 10);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct LeasedStore<S> {
    inner: S,
    pub(super) config: LeaseConfig,
    shards: Box<[Shard]>,
    per_shard: usize,
    hasher: foldhash::quality::RandomState,
    counters: Counters,
    /// The instance count learned by the failover guard below, if handed in.
    pub(super) count: Option<InstanceCount>,
}

#[derive(Debug, Default)]
struct Counters {
    local_allowed: AtomicU64,
    local_denied: AtomicU64,
    claims: AtomicU64,
    claims_denied: AtomicU64,
    units_granted: AtomicU64,
    bypassed: AtomicU64,
}

/// What the slice table says about one check.
enum Step<'a> {
    /// Answered from the slice (spent) or its cached denial.
    Answer(Decision, Option<u64>),
    /// Another check is claiming for this key: wait, then look again.
    Wait(OwnedNotified),
    /// This check claims `want` units.
    Claim(u64, ClaimGuard<'a>),
    /// No slice can be held for this key: decide exactly.
    Bypass,
}

/// How the caller addressed the record: plain or scoped ([`ScopedKey`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Plain,
    Scoped,
}

impl Target {
    fn of(scoped: bool) -> Self {
        if scoped {
            Self::Scoped
        } else {
            Self::Plain
        }
    }

    /// `key`, addressed as the caller did.
    fn key(self, key: &Key) -> ScopedKey<'_> {
        match self {
            Self::Plain => ScopedKey::plain(key),
            Self::Scoped => ScopedKey::scoped(key),
        }
    }
}

impl<S: Store> LeasedStore<S> {
    /// Leases in front of `inner`.
    pub fn new(inner: S, config: LeaseConfig) -> Self {
        Self {
            inner,
            config,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            per_shard: config.capacity.div_ceil(SHARDS).max(1),
            hasher: foldhash::quality::RandomState::default(),
            counters: Counters::default(),
            count: None,
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    /// Counters for metrics.
    pub fn stats(&self) -> LeaseStats {
        let c = &self.counters;
        LeaseStats {
            local_allowed: c.local_allowed.load(Ordering::Relaxed),
            local_denied: c.local_denied.load(Ordering::Relaxed),
            claims: c.claims.load(Ordering::Relaxed),
            claims_denied: c.claims_denied.load(Ordering::Relaxed),
            units_granted: c.units_granted.load(Ordering::Relaxed),
            bypassed: c.bypassed.load(Ordering::Relaxed),
            slices: self.shards.iter().map(|s| lock(s).len()).sum(),
        }
    }

    /// Units claimed and not yet spent, over every key, at `now_ns` (what sits idle in
    /// this instance: the under-admission bound is stated in these terms).
    pub fn held_units(&self, now_ns: u64) -> u64 {
        self.shards
            .iter()
            .map(|s| {
                lock(s)
                    .values()
                    .map(|slice| slice.live_units(now_ns))
                    .sum::<u64>()
            })
            .sum()
    }

    fn id(key: &Key, rule: &Rule, target: Target) -> Id {
        Id {
            key: key.clone(),
            scope: rule.scope(),
            scoped: target == Target::Scoped,
        }
    }

    fn slot(&self, id: &Id) -> (u64, &Shard) {
        let hash = self.hasher.hash_one(id);
        let index = usize::try_from(hash >> 60).unwrap_or(0) % SHARDS;
        (hash, &self.shards[index])
    }

    fn look(&self, id: &Id, rule: &Rule, cost: u64, now_ns: u64) -> Step<'_> {
        let (hash, shard) = self.slot(id);
        let mut map = lock(shard);
        if !map.contains_key(&hash) {
            if map.len() >= self.per_shard {
                map.retain(|_, s| !s.is_idle(now_ns));
            }
            if map.len() >= self.per_shard {
                return Step::Bypass;
            }
            map.insert(hash, Slice::new(id.clone(), now_ns));
        }
        let Some(slice) = map.get_mut(&hash) else {
            return Step::Bypass;
        };
        if slice.id != *id {
            // Two records on one 64-bit hash: decide this one exactly.
            return Step::Bypass;
        }
        if let Some(claim) = &slice.claiming {
            return Step::Wait(claim.clone().notified_owned());
        }
        if let Some(d) = slice.spend(cost, now_ns) {
            self.counters.local_allowed.fetch_add(1, Ordering::Relaxed);
            return Step::Answer(d, Some(slice.generation));
        }
        if let Some(d) = slice.denial(cost, now_ns) {
            self.counters.local_denied.fetch_add(1, Ordering::Relaxed);
            return Step::Answer(d, None);
        }
        let ttl_ns = self.config.ttl_ns(rule);
        let cap = if slice.short {
            // The store was left short: what came back since is at most one lifetime's
            // units; asking for more would be refused (a second call for the rest).
            self.config.per_lifetime(rule, cost, ttl_ns)
        } else if slice.overloaded {
            self.in_force().overload_cap(rule, cost)
        } else {
            self.config.cap(rule, cost)
        };
        let want = slice.want(cost, now_ns, ttl_ns, cap);
        let notify = Arc::new(Notify::new());
        slice.claiming = Some(notify.clone());
        Step::Claim(
            want,
            ClaimGuard {
                shard,
                hash,
                notify,
                settled: false,
            },
        )
    }

    /// One store check of `n` units, as the caller addressed the record.
    async fn ask(
        &self,
        target: Target,
        key: &Key,
        rule: &Rule,
        n: u64,
        now_ns: u64,
    ) -> Result<Decision, CheckError> {
        self.counters.claims.fetch_add(1, Ordering::Relaxed);
        let op = Op::Check { cost: n };
        let outcome = self.inner.apply(target.key(key), rule, op, now_ns).await?;
        match outcome {
            Outcome::Decision(d) => {
                if d.allowed {
                    self.counters.units_granted.fetch_add(n, Ordering::Relaxed);
                } else {
                    self.counters.claims_denied.fetch_add(1, Ordering::Relaxed);
                }
                Ok(d)
            }
            other => Err(CheckError::Store(StoreError::Unavailable(format!(
                "the store answered a lease claim with {other:?}"
            )))),
        }
    }

    /// Decides a check of `cost` (at least 1) on a leased rule: the decision, and the
    /// slice generation its units came from when it consumed any.
    async fn take(
        &self,
        target: Target,
        key: &Key,
        rule: &Rule,
        cost: u64,
        now_ns: u64,
    ) -> Result<(Decision, Option<u64>), CheckError> {
        let id = Self::id(key, rule, target);
        loop {
            let (want, guard) = match self.look(&id, rule, cost, now_ns) {
                Step::Answer(d, generation) => return Ok((d, generation)),
                Step::Wait(claim_settled) => {
                    claim_settled.await;
                    continue;
                }
                Step::Bypass => {
                    self.counters.bypassed.fetch_add(1, Ordering::Relaxed);
                    let d = self.ask(target, key, rule, cost, now_ns).await?;
                    return Ok((d, None));
                }
                Step::Claim(want, guard) => (want, guard),
            };
            let ttl_ns = self.config.ttl_ns(rule);
            let instances = self.instances();
            // What the rule gives back over one lifetime, and half of this instance's part
            // of it (half: the wait below is for a whole lifetime's units, and the store's
            // clock may run a little behind this one).
            let per_lifetime = self.config.per_lifetime(rule, cost, ttl_ns);
            let floor = partial_floor(cost, want)
                .min(per_lifetime / instances / 2)
                .max(cost);
            let first = self.ask(target, key, rule, want, now_ns).await?;
            // A refused claim takes what is left when that is at least the floor (half of
            // it, or half this instance's part of one lifetime's units if less) and the rest is
            // not back within a quarter lifetime: waiting would leave those units idle in
            // the store. Units back sooner are worth waiting for: one call for the slice.
            let partial = want > cost
                && first.remaining >= floor
                && super::slice::nanos(first.retry_after) > ttl_ns / 4;
            let (granted, store) = if first.allowed {
                (want, first)
            } else if partial {
                let part = first.remaining.min(want);
                let second = self.ask(target, key, rule, part, now_ns).await?;
                (if second.allowed { part } else { 0 }, second)
            } else {
                (0, first)
            };
            let settled = guard.settle(|slice| {
                if granted > 0 {
                    // When the grant left the store short of even a partial claim, the
                    // store would refuse the next one until units are back: wait here
                    // until one lifetime's units are (at most one lifetime, for the
                    // rate-based rules; a fixed window's end). Waiting for more (the
                    // limit, or every instance's share of it) left keys with no unit for
                    // most of a window while the exact rule admitted at its rate.
                    let back = (store.remaining < floor)
                        .then(|| rule.retry_after_allowed(&store, per_lifetime))
                        .flatten();
                    let d = slice.grant(granted, cost, &store, back, now_ns, ttl_ns);
                    (d, Some(slice.generation))
                } else {
                    // Refused: answered here for at most this instance's part of a
                    // lifetime, and at most half of one (its `retry_after` is for all it
                    // asked). Shorter than the wait after a grant, so an instance that
                    // lost the race to another claims first next time: instances at
                    // overload take turns instead of one starving, whatever count of
                    // instances was stated.
                    let most = Duration::from_nanos((ttl_ns / instances.max(2)).max(1));
                    (slice.deny(cost, &store, most, now_ns), None)
                }
            });
            // Without its slice (it cannot be evicted while claiming) the answer is the
            // store's own.
            return Ok(settled.unwrap_or((store, None)));
        }
    }

    /// Puts back units an all-or-nothing check took from slices before another limit
    /// denied it.
    fn give_back(&self, taken: &[(Id, u64)], cost: u64, now_ns: u64) {
        for (id, generation) in taken {
            let (hash, shard) = self.slot(id);
            if let Some(slice) = lock(shard).get_mut(&hash) {
                if slice.id == *id {
                    slice.give_back(*generation, cost, now_ns);
                }
            }
        }
    }

    /// Drops the key's slice (a reward, penalty, block, unblock or reset changed the
    /// record in the store: the next check claims afresh).
    fn forget(&self, key: &Key, rule: &Rule, target: Target) {
        let id = Self::id(key, rule, target);
        let (hash, shard) = self.slot(&id);
        let mut map = lock(shard);
        if map
            .get(&hash)
            .is_some_and(|s| s.id == id && s.claiming.is_none())
        {
            map.remove(&hash);
        }
    }

    async fn decide(
        &self,
        target: Target,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let leased = rule.mode() == Mode::Leased;
        match op {
            Op::Check { cost: cost @ 1.. } if leased => {
                let (d, _) = self.take(target, key, rule, cost, now_ns).await?;
                return Ok(Outcome::Decision(d));
            }
            Op::Reward { .. } | Op::Penalty { .. } | Op::Block { .. } | Op::Unblock | Op::Reset
                if leased =>
            {
                self.forget(key, rule, target);
            }
            _ => {}
        }
        self.inner.apply(target.key(key), rule, op, now_ns).await
    }

    async fn decide_all(
        &self,
        target: Target,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        let leased = |rule: &Rule| rule.mode() == Mode::Leased;
        if cost == 0 || !limits.iter().any(|(_, rule)| leased(rule)) {
            return self.inner_all(target, limits, cost, now_ns).await;
        }
        let mut each: Vec<Option<Decision>> = vec![None; limits.len()];
        let mut taken: Vec<(Id, u64)> = Vec::new();
        let mut allowed = true;
        for (i, (key, rule)) in limits.iter().enumerate() {
            if !leased(rule) {
                continue;
            }
            let (d, generation) = match self.take(target, key, rule, cost, now_ns).await {
                Ok(taken_now) => taken_now,
                Err(e) => {
                    self.give_back(&taken, cost, now_ns);
                    return Err(e);
                }
            };
            each[i] = Some(d);
            if let Some(generation) = generation {
                taken.push((Self::id(key, rule, target), generation));
            }
            if !d.allowed {
                allowed = false;
                break;
            }
        }
        let exact: Vec<(usize, (Key, Rule))> = limits
            .iter()
            .enumerate()
            .filter(|(i, _)| each[*i].is_none())
            .map(|(i, limit)| (i, limit.clone()))
            .collect();
        let exact_limits: Vec<(Key, Rule)> = exact.iter().map(|(_, l)| l.clone()).collect();
        // Exact limits (and leased ones not reached) are charged only if every leased one
        // allowed; after a leased denial they are only looked at.
        let charge = if allowed { cost } else { 0 };
        if !exact_limits.is_empty() {
            let answer = match self.inner_all(target, &exact_limits, charge, now_ns).await {
                Ok(answer) => answer,
                Err(e) => {
                    self.give_back(&taken, cost, now_ns);
                    return Err(e);
                }
            };
            for ((i, _), d) in exact.iter().zip(answer.each) {
                each[*i] = Some(d);
            }
            allowed &= answer.allowed;
        }
        if !allowed {
            self.give_back(&taken, cost, now_ns);
        }
        let each = each
            .into_iter()
            .map(|d| {
                d.ok_or_else(|| {
                    CheckError::Store(StoreError::Unavailable(
                        "a limit of an all-or-nothing check was left undecided".into(),
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Decisions { allowed, each })
    }

    async fn inner_all(
        &self,
        target: Target,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        let limits = match target {
            Target::Plain => ScopedLimits::plain(limits),
            Target::Scoped => ScopedLimits::scoped(limits),
        };
        self.inner.check_all(limits, cost, now_ns).await
    }
}

/// The fewest units worth a partial claim after a claim of `want` was refused: half of it
/// (smaller slices near the limit, not a call per unit), and never below the cost.
fn partial_floor(cost: u64, want: u64) -> u64 {
    (want / 2).max(cost)
}

pub(super) fn lock(m: &Shard) -> std::sync::MutexGuard<'_, HashMap<u64, Slice>> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: Store> Store for LeasedStore<S> {
    fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Outcome, CheckError>> + Send {
        self.decide(Target::of(key.is_scoped()), key.key(), rule, op, now_ns)
    }

    fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Decisions, CheckError>> + Send {
        let target = Target::of(limits.is_scoped());
        self.decide_all(target, limits.as_slice(), cost, now_ns)
    }

    fn ping(&self) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.inner.ping()
    }
}
