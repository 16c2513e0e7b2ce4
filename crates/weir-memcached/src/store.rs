//! [`MemcachedStore`]: the [`Store`] the limiter calls. It holds the pool and the settings
//! and hands each call to `apply.rs` or `check_all.rs`; it decides nothing itself.

use std::sync::Arc;

use weir_core::{CheckError, Decisions, Key, Op, Outcome, Rule, Store, StoreError};

use crate::backoff::Backoff;
use crate::client::{Command, Pool, Reply};
use crate::config::MemcachedStoreBuilder;

/// Weir's records in memcached, shared by every instance that points at the same server.
///
/// Cheap to clone: clones share one connection pool. See the [crate docs](crate) for what is
/// atomic and what is not.
#[derive(Debug, Clone)]
pub struct MemcachedStore {
    inner: Arc<Inner>,
}

/// What every call needs.
#[derive(Debug)]
pub(crate) struct Inner {
    pub pool: Pool,
    pub prefix: String,
    pub max_retries: u32,
    pub backoff: Backoff,
}

impl MemcachedStore {
    /// A store for the memcached at `addr` (`host:port` or `memcached://host:port`) with the
    /// default settings; see [`MemcachedStore::builder`].
    pub fn new(addr: &str) -> Result<Self, crate::ConfigError> {
        Self::builder(addr).build()
    }

    /// A builder for the memcached at `addr`.
    pub fn builder(addr: &str) -> MemcachedStoreBuilder {
        MemcachedStoreBuilder::new(addr)
    }

    pub(crate) fn from_inner(inner: Inner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }
}

impl Store for MemcachedStore {
    async fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        crate::apply::apply(&self.inner, key, rule, op, now_ns).await
    }

    async fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        crate::check_all::check_all(&self.inner, limits, cost, now_ns).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        match self.inner.pool.one(Command::Version).await? {
            Reply::Version(_) => Ok(()),
            other => Err(StoreError::Unavailable(format!(
                "memcached: unexpected reply to version: {other:?}"
            ))),
        }
    }
}
