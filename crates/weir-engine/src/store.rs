//! The store the engine decides on. `weir_core::Store` returns `impl Future`, so it cannot
//! be a trait object: [`AnyStore`] is an enum that implements `Store` by delegation.
//!
//! A network store (Redis in any deployment, memcached) is always wrapped, outermost
//! first, in `LeasedStore` (rules with `mode: leased` decided from slices claimed ahead;
//! exact rules pass through), `OverLimitCache` (repeat checks of a denied key answered
//! in-process until their `retry_after`) and `FailoverStore` (a timeout on every call, a
//! circuit breaker with a PING probe, and each rule's failure policy while the store is
//! down). The memory store needs none of them.

use weir_core::{
    CheckError, Decisions, MemoryStore, Op, Outcome, Rule, ScopedKey, ScopedLimits, Store,
    StoreError,
};
use weir_memcached::MemcachedStore;
use weir_redis::{RedisStore, TimeSource};
use weir_resilience::{
    FailoverConfig, FailoverStats, FailoverStore, FallbackShare, LeaseConfig, LeaseStats,
    LeasedStore, OverLimitCache, OverLimitStats,
};

use crate::store_url::{StoreSpec, StoreUrlError};

/// The share of the memory store's capacity the limit overrides' records may hold, in
/// percent, whatever limits the requests name (one share for all of them: every override
/// rule carries one name, `weir_config::LIMIT_OVERRIDE_RULE`). Past it their new keys
/// evict their own unlimited records, or are refused (503) while every one is limited;
/// the configured rules keep the rest of the capacity, and readiness is not affected.
pub const LIMIT_OVERRIDE_SHARE_PERCENT: u8 = 10;

/// A network store behind its guards.
pub type Guarded<S> = LeasedStore<OverLimitCache<FailoverStore<S>>>;

/// Whose clock a network store decides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum StoreClock {
    /// The store's own clock where it has one (Redis `TIME`): instances sharing the store
    /// need not agree on the time. memcached has none and always uses the process clock.
    #[default]
    Store,
    /// The engine's clock (`EngineSettings::clock`): what tests with a `ManualClock` use.
    Process,
}

/// The store the engine decides on.
#[derive(Debug)]
#[non_exhaustive]
pub enum AnyStore {
    /// The embedded memory store.
    Memory(MemoryStore),
    /// Redis or Valkey (single node, Sentinel or Cluster), guarded.
    Redis(Guarded<RedisStore>),
    /// memcached, guarded.
    Memcached(Guarded<MemcachedStore>),
}

/// The guards around `store`. Leased rules divide by the instance count the failover
/// guard learns from the store's presence key (or `--instances`, if larger), as the local
/// fallback does.
fn guard<S: Store>(store: S, failover: FailoverConfig, lease: LeaseConfig) -> Guarded<S> {
    let failover_store = FailoverStore::new(store, failover);
    let count = failover_store.instance_count();
    let lease = LeaseConfig {
        instances: failover.instances,
        ..lease
    };
    LeasedStore::new(OverLimitCache::new(failover_store), lease).with_instance_count(count)
}

/// How a network store is built, besides its URL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreOptions {
    /// The prefix of every key a network store writes (default: the store's, `weir`).
    pub prefix: Option<String>,
    /// Redis: coalesce concurrent decisions into one script call, gathered for at most this
    /// long (envoyproxy/ratelimit's `REDIS_PIPELINE_WINDOW`; at most 1 s). `None`: each
    /// decision is its own call.
    pub redis_batch_wait: Option<std::time::Duration>,
    /// Redis: the most decisions in one batched call (`None`:
    /// [`REDIS_BATCH_DECISIONS`](Self::REDIS_BATCH_DECISIONS)).
    pub redis_batch_size: Option<usize>,
    /// How leased rules claim and age their slices (the instance count is the failover's).
    pub lease: LeaseConfig,
}

impl StoreOptions {
    /// The most decisions in one Redis batch.
    pub const REDIS_BATCH_DECISIONS: usize = 100;
}

impl AnyStore {
    /// Builds the store `spec` names (nothing connects yet: the first call does). Must run
    /// inside a tokio runtime (the failover probe runs there).
    pub fn open(
        spec: &StoreSpec,
        failover: FailoverConfig,
        clock: StoreClock,
    ) -> Result<AnyStore, StoreUrlError> {
        Self::open_with(spec, failover, clock, &StoreOptions::default())
    }

    /// [`AnyStore::open`] with `options` (the memory store ignores them).
    pub fn open_with(
        spec: &StoreSpec,
        failover: FailoverConfig,
        clock: StoreClock,
        options: &StoreOptions,
    ) -> Result<AnyStore, StoreUrlError> {
        let prefix = options.prefix.as_deref();
        match spec {
            StoreSpec::Memory { capacity } => Ok(AnyStore::Memory(
                MemoryStore::builder()
                    .capacity(*capacity)
                    .scope_share(
                        weir_config::limit_override_scope(),
                        LIMIT_OVERRIDE_SHARE_PERCENT,
                    )
                    .build(),
            )),
            StoreSpec::Network { scheme, url } if scheme.starts_with("redis") => {
                let time = match clock {
                    StoreClock::Store => TimeSource::Store,
                    StoreClock::Process => TimeSource::Process,
                };
                let mut builder = RedisStore::builder(url.as_str())
                    .timeout(failover.timeout)
                    .first_timeout(failover.first_timeout)
                    .time_source(time);
                if let Some(prefix) = prefix {
                    builder = builder.prefix(prefix);
                }
                if let Some(wait) = options.redis_batch_wait {
                    let size = options
                        .redis_batch_size
                        .unwrap_or(StoreOptions::REDIS_BATCH_DECISIONS);
                    builder = builder.batch(size.max(1), wait);
                }
                let store = builder
                    .build()
                    .map_err(|e| StoreUrlError::Invalid(e.to_string()))?;
                Ok(AnyStore::Redis(guard(store, failover, options.lease)))
            }
            StoreSpec::Network { url, .. } => {
                let mut builder = MemcachedStore::builder(url).timeout(failover.timeout);
                if let Some(prefix) = prefix {
                    builder = builder.prefix(prefix);
                }
                let store = builder
                    .build()
                    .map_err(|e| StoreUrlError::Invalid(e.to_string()))?;
                Ok(AnyStore::Memcached(guard(store, failover, options.lease)))
            }
        }
    }

    /// `memory`, `redis` or `memcached`: the `store` label of metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            AnyStore::Memory(_) => "memory",
            AnyStore::Redis(_) => "redis",
            AnyStore::Memcached(_) => "memcached",
        }
    }

    /// The memory store, if that is what this is (the engine sweeps it periodically).
    pub fn memory(&self) -> Option<&MemoryStore> {
        match self {
            AnyStore::Memory(store) => Some(store),
            _ => None,
        }
    }

    /// Whether a failover guard (and so each rule's failure policy) stands in front of it.
    pub fn is_guarded(&self) -> bool {
        !matches!(self, AnyStore::Memory(_))
    }

    /// The failover guard's counters, for a network store.
    pub fn failover_stats(&self) -> Option<FailoverStats> {
        match self {
            AnyStore::Memory(_) => None,
            AnyStore::Redis(s) => Some(s.inner().inner().stats()),
            AnyStore::Memcached(s) => Some(s.inner().inner().stats()),
        }
    }

    /// The local fallback's share in force (the instance count each rule's limit is
    /// divided by while a store part is down, and where it comes from), for a network store.
    pub fn fallback_share(&self) -> Option<FallbackShare> {
        match self {
            AnyStore::Memory(_) => None,
            AnyStore::Redis(s) => Some(s.inner().inner().fallback_share()),
            AnyStore::Memcached(s) => Some(s.inner().inner().fallback_share()),
        }
    }

    /// Starts announcing this instance in a network store (the presence key every
    /// instance renews: how many share the store, which sets the fallback's share).
    pub fn spawn_presence<C: weir_core::Clock + 'static>(
        &self,
        clock: C,
    ) -> Option<tokio::task::JoinHandle<()>> {
        match self {
            AnyStore::Memory(_) => None,
            AnyStore::Redis(s) => Some(s.inner().inner().spawn_presence(clock)),
            AnyStore::Memcached(s) => Some(s.inner().inner().spawn_presence(clock)),
        }
    }

    /// The over-limit cache's counters, for a network store.
    pub fn over_limit_stats(&self) -> Option<OverLimitStats> {
        match self {
            AnyStore::Memory(_) => None,
            AnyStore::Redis(s) => Some(s.inner().stats()),
            AnyStore::Memcached(s) => Some(s.inner().stats()),
        }
    }

    /// The lease counters (slices claimed, checks answered from them), for a network store.
    pub fn lease_stats(&self) -> Option<LeaseStats> {
        match self {
            AnyStore::Memory(_) => None,
            AnyStore::Redis(s) => Some(s.stats()),
            AnyStore::Memcached(s) => Some(s.stats()),
        }
    }
}

// The memory store decides in place, inside the caller's future; a network store's future
// is large (a script call behind three guards), so it is boxed. Every caller's future stays
// small, and none needs to know which store it has.
impl Store for AnyStore {
    // Each store names a scoped record its own way: the memory store keeps the scope
    // beside the key (and decides in place: its future is ready), the network stores
    // scope the key's bytes.
    async fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        match self {
            AnyStore::Memory(s) => s.apply(key, rule, op, now_ns).await,
            AnyStore::Redis(s) => Box::pin(s.apply(key, rule, op, now_ns)).await,
            AnyStore::Memcached(s) => Box::pin(s.apply(key, rule, op, now_ns)).await,
        }
    }

    async fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        match self {
            AnyStore::Memory(s) => s.check_all(limits, cost, now_ns).await,
            AnyStore::Redis(s) => Box::pin(s.check_all(limits, cost, now_ns)).await,
            AnyStore::Memcached(s) => Box::pin(s.check_all(limits, cost, now_ns)).await,
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        match self {
            AnyStore::Memory(s) => s.ping().await,
            AnyStore::Redis(s) => s.ping().await,
            AnyStore::Memcached(s) => s.ping().await,
        }
    }
}
