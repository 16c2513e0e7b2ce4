//! How many instances share the store, learned from the store itself: each
//! [`FailoverStore`](crate::FailoverStore) holds a concurrency lease on one presence key
//! (holder: this instance's random id, lease [`PRESENCE_TTL`]) and renews it every
//! [`PRESENCE_EVERY`]; the lease's answer says how many live holders there are. The local
//! fallback then allows each instance `limit / n`, `n` the larger of the stated count
//! (`instances`) and the learned one, so instances that share a store never each allow the
//! whole limit during an outage because nobody said how many they are.
//!
//! Fail safe: the count only makes shares smaller. An instance that stops keeps counting
//! until its lease expires (the others' shares stay smaller meanwhile); a store that never
//! answered leaves the stated count in force, and `/readyz` and the logs say which.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use weir_core::{CheckError, Clock, Key, Op, Outcome, Rule, Store, StoreError};

use crate::failover::FailoverStore;

/// The presence key (under the store's prefix, like every key).
pub const PRESENCE_KEY: &str = "weir-instances";
/// How long one announcement counts an instance.
pub const PRESENCE_TTL: Duration = Duration::from_secs(30);
/// How often an instance renews its announcement.
pub const PRESENCE_EVERY: Duration = Duration::from_secs(10);
/// The most instances counted.
const MAX_INSTANCES: u64 = 65_536;

/// Which instance count the local fallback's share is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareSource {
    /// The stated count (`instances`): no presence count is known yet (the store has not
    /// answered an announcement), or the learned one is not larger.
    Stated,
    /// The presence count learned from the store, larger than the stated one.
    Learned,
}

/// The local fallback's share in force.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FallbackShare {
    /// Each rule allows `limit / instances` per instance while its store part is down.
    pub instances: u64,
    /// Where that count comes from.
    pub source: ShareSource,
    /// The count the presence key last answered, if it has answered.
    pub learned: Option<u64>,
}

impl ShareSource {
    /// `"stated"` or `"learned"`, for logs and `/readyz`.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareSource::Stated => "stated",
            ShareSource::Learned => "learned",
        }
    }
}

/// The instance count in force, shared by a [`FailoverStore`] (which learns it from the
/// presence key) and the [`LeasedStore`](crate::LeasedStore) in front of it (which sizes
/// an overloaded instance's claims by it): the larger of the stated count and the learned
/// one. Cheap to clone; clones read the same count.
#[derive(Debug, Clone)]
pub struct InstanceCount {
    stated: u64,
    learned: Arc<AtomicU64>,
}

impl InstanceCount {
    /// A count that is only ever `stated` (nothing learns it).
    pub fn stated(stated: u64) -> Self {
        Self {
            stated,
            learned: Arc::new(AtomicU64::new(0)),
        }
    }

    /// The share in force: the larger of the stated count and the learned one.
    pub fn share(&self) -> FallbackShare {
        let stated = self.stated.max(1);
        let learned = self.learned.load(Ordering::Relaxed);
        let (instances, source) = if learned > stated {
            (learned, ShareSource::Learned)
        } else {
            (stated, ShareSource::Stated)
        };
        FallbackShare {
            instances,
            source,
            learned: (learned > 0).then_some(learned),
        }
    }
}

impl<S: Store> FailoverStore<S> {
    /// The local fallback's share in force: the larger of the stated count and the
    /// presence count learned from the store.
    pub fn fallback_share(&self) -> FallbackShare {
        self.instance_count().share()
    }

    /// The instance count in force, shared: hand it to the
    /// [`LeasedStore`](crate::LeasedStore) in front
    /// ([`with_instance_count`](crate::LeasedStore::with_instance_count)) so that leased
    /// rules divide by the count this store learns too.
    pub fn instance_count(&self) -> InstanceCount {
        InstanceCount {
            stated: self.inner.config.instances,
            learned: Arc::clone(&self.inner.learned_instances),
        }
    }

    /// Announces this instance in the store at `now_ns` (one lease renewal, under the
    /// timeout) and learns how many instances hold a live announcement: that count.
    pub async fn announce(&self, now_ns: u64) -> Result<u64, CheckError> {
        let inner = &self.inner;
        let key = Key::new(PRESENCE_KEY)?;
        let rule = Rule::concurrency(MAX_INSTANCES).map_err(|e| {
            CheckError::Store(StoreError::Unavailable(format!("presence rule: {e}")))
        })?;
        let ttl_ns = u64::try_from(PRESENCE_TTL.as_nanos()).unwrap_or(u64::MAX);
        let op = Op::Acquire {
            holder: &inner.instance_id,
            ttl_ns,
        };
        let call = inner
            .primary
            .apply(weir_core::ScopedKey::plain(&key), &rule, op, now_ns);
        let outcome = match tokio::time::timeout(inner.config.timeout, call).await {
            Ok(outcome) => outcome?,
            Err(_) => {
                return Err(CheckError::Store(StoreError::Timeout {
                    timeout_ms: crate::failover::timeout_ms(inner.config.timeout),
                }))
            }
        };
        let Outcome::Decision(d) = outcome else {
            return Err(CheckError::Store(StoreError::Unavailable(format!(
                "the store answered a presence announcement with {outcome:?}"
            ))));
        };
        let count = d.limit.saturating_sub(d.remaining).max(1);
        let before = inner.learned_instances.swap(count, Ordering::Relaxed);
        if before != count {
            let share = self.fallback_share();
            tracing::info!(
                instances = count,
                share_instances = share.instances,
                share_source = share.source.as_str(),
                "instances sharing the store: {count} (presence); in force: {} ({}): while a \
                 store part is down each rule's local fallback allows limit / {0}, and an \
                 overloaded instance claims at most limit / {0} of a leased rule",
                share.instances,
                share.source.as_str()
            );
        }
        Ok(count)
    }

    /// Announces this instance now and every [`PRESENCE_EVERY`] (on the tokio timer) at
    /// `clock`'s time, until the store is dropped or the task aborted. A failed
    /// announcement keeps the last count.
    pub fn spawn_presence<C: Clock + 'static>(&self, clock: C) -> tokio::task::JoinHandle<()> {
        let weak = std::sync::Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            loop {
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                let store = FailoverStore { inner };
                if let Err(e) = store.announce(clock.now_ns()).await {
                    tracing::debug!(error = %e, "presence announcement failed");
                }
                drop(store);
                tokio::time::sleep(PRESENCE_EVERY).await;
            }
        })
    }
}
