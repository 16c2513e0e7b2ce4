//! [`MemcachedStore`]: the [`Store`] the limiter calls. It holds the shared context (the
//! servers, the ring, the settings: `context.rs`) and hands each call to `apply.rs` or
//! `check_all.rs`; it decides nothing itself. Built by `builder.rs`.

use std::sync::Arc;

use weir_core::{
    CheckError, Decisions, Op, Outcome, Rule, ScopedKey, ScopedLimits, Store, StoreError,
};

use crate::context::Inner;

/// Weir's records in memcached, shared by every instance that points at the same servers.
///
/// Cheap to clone: clones share the connection pools. See the [crate docs](crate) for what
/// is atomic and what is not, and for how keys are spread over several servers.
#[derive(Debug, Clone)]
pub struct MemcachedStore {
    inner: Arc<Inner>,
}

impl MemcachedStore {
    pub(crate) fn from_inner(inner: Inner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }
}

impl Store for MemcachedStore {
    /// A scoped key's record is named by its bytes ([`ScopedKey::record`]).
    async fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        crate::apply::apply(&self.inner, &key.record(rule), rule, op, now_ns).await
    }

    async fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        crate::check_all::check_all(&self.inner, &limits.records(), cost, now_ns).await
    }

    /// `Ok` when every server answers.
    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    /// One part per server of the list: each fails alone.
    fn parts(&self) -> usize {
        self.inner.server_count()
    }

    /// The server the ring places `key`'s record on.
    fn part_of(&self, key: ScopedKey<'_>, rule: &Rule) -> usize {
        if self.parts() == 1 {
            return 0;
        }
        self.inner.server_of_key(&key.record(rule))
    }

    /// `Ok` when server `part` answers.
    async fn ping_part(&self, part: usize) -> Result<(), StoreError> {
        self.inner.ping_server(part).await
    }
}
