//! # weir-resilience
//!
//! What stands between a decision and a shared store that may fail or be flooded. Both
//! types wrap any [`Store`](weir_core::Store) and are stores themselves, so they stack:
//!
//! ```text
//! Limiter ─▶ LeasedStore ─▶ OverLimitCache ─▶ FailoverStore ─▶ RedisStore / MemcachedStore
//!            (leased rules   (denied keys        (timeout, breaker,
//!             from slices)    answered locally)   PING probe, policy)
//! ```
//!
//! - [`LeasedStore`]: rules opted in to [leased mode](weir_core::Rule::leased) are decided
//!   in-process from slices of their limit claimed from the store ahead of time, within
//!   the over- and under-admission bounds its docs state; exact rules pass through.
//!
//! - [`FailoverStore`]: every store call has a timeout; each part of the store (the whole
//!   store, one server of a memcached list, or one primary of a Redis Cluster) has its own
//!   circuit, which opens after
//!   `failure_threshold` consecutive failures confirmed by a failed PING of the part; then
//!   every request on that part's keys goes straight to its rule's
//!   [`FailurePolicy`](weir_core::FailurePolicy) (local fallback with this instance's share
//!   of the limit, fail open, or fail closed) without waiting on the dead part. A
//!   background PING probe closes the circuit when the part answers again and, if
//!   enabled, pushes the usage counted locally during the outage to the store.
//! - [`OverLimitCache`]: once a key is denied with `retry_after` T, the same check within
//!   T is answered in-process, so an attack does not turn into load on the store. An
//!   admission that exhausts a fixed window, GCRA or bucket announces that denial, and
//!   when it runs out one check probes the store while the key's others wait: under
//!   overload only admissions reach the store.
//!
//! ```
//! use std::time::Duration;
//! use weir_core::{Key, Limiter, MemoryStore, Rule, SystemClock};
//! use weir_resilience::{FailoverConfig, FailoverStore, OverLimitCache};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! // In production the primary is a RedisStore; any Store works.
//! let primary = MemoryStore::default();
//! let config = FailoverConfig { instances: 4, ..FailoverConfig::default() };
//! let store = OverLimitCache::new(FailoverStore::new(primary, config));
//! let limiter = Limiter::new(store, SystemClock::new());
//! let d = limiter.check(&Key::new("api:alice")?, &Rule::per_second(10)?, 1).await?;
//! assert!(d.allowed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

mod breaker;
mod deny_cache;
mod failed_closed;
mod failover;
mod lease;
mod presence;
mod probe;

pub use breaker::Mode;
pub use deny_cache::{OverLimitCache, OverLimitStats};
pub use failed_closed::noting_failed_closed;
pub use failover::{FailoverConfig, FailoverStats, FailoverStore};
pub use lease::{LeaseConfig, LeaseStats, LeasedStore};
pub use presence::{
    FallbackShare, InstanceCount, ShareSource, PRESENCE_EVERY, PRESENCE_KEY, PRESENCE_TTL,
};

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
