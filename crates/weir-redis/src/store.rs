//! [`RedisStore`]: the [`Store`] whose records live in Redis. Each call validates and
//! encodes on this side (`encode.rs`), names the key (`keys.rs`), runs one script in one
//! round trip under a timeout (`exec.rs`, or coalesced with others by `batch.rs`), and
//! reads the reply (`reply.rs`).

use std::sync::Arc;

use weir_core::{
    CheckError, Decisions, Key, Op, Outcome, Rule, ScopedKey, ScopedLimits, Store, StoreError,
};

use crate::batch::Batcher;
use crate::encode::{self, Args};
use crate::exec::Exec;
use crate::scripts::Entry;
use crate::{keys, reply, shards};

/// A rate-limit store in Redis or Valkey: single node, Sentinel or Cluster.
///
/// Cheap to clone: clones share the connection. See the crate docs for the design and
/// [`RedisStoreBuilder`](crate::RedisStoreBuilder) for the options.
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) exec: Arc<Exec>,
    pub(crate) prefix: String,
    pub(crate) time: TimeSource,
    pub(crate) cluster: bool,
    pub(crate) batcher: Option<Batcher>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("target", &self.inner.exec.redactor.label)
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.exec.timeout)
            .field("time", &self.inner.time)
            .field("batching", &self.inner.batcher.is_some())
            .finish_non_exhaustive()
    }
}

const CROSS_SLOT: &str = "must share one hash slot on a Redis Cluster: give the keys of one \
                          check_all a common hash tag, such as `{user-7}`";

impl Inner {
    /// `now_ns` for the script: the caller's under the process clock, none (`TIME`) under
    /// the store clock.
    fn now(&self, now_ns: u64) -> Option<u64> {
        match self.time {
            TimeSource::Store => None,
            TimeSource::Process => Some(now_ns),
        }
    }

    async fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let (tag, block) = encode::op_block(rule, &op, now_ns)?;
        let name = keys::record_key(&self.prefix, key);
        let mut timed = Args::default();
        timed.now(self.now(now_ns));
        timed.0.extend(block.0);
        let value = match &self.batcher {
            Some(batcher) => self.exec.bounded(batcher.submit(name, tag, timed)).await?,
            None => {
                self.exec
                    .call(&self.exec.single(tag, &name, &timed))
                    .await?
            }
        };
        reply::outcome(value, rule, &op)
    }

    async fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        let op = Op::Check { cost };
        for (_, rule) in limits {
            encode::validate(rule, &op, now_ns)?;
        }
        if limits.is_empty() {
            return Ok(Decisions {
                allowed: true,
                each: Vec::new(),
            });
        }
        let rules = limits
            .iter()
            .map(|(_, rule)| encode::rule_args(rule))
            .collect::<Result<Vec<_>, _>>()?;
        // Distinct keys, in order of first appearance; each limit points at its key.
        let mut names: Vec<(&Key, Vec<u8>)> = Vec::with_capacity(limits.len());
        let mut slots = Vec::with_capacity(limits.len());
        for (key, _) in limits {
            let index = match names.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    names.push((key, keys::record_key(&self.prefix, key)));
                    names.len() - 1
                }
            };
            slots.push(index + 1);
        }
        if self.cluster {
            let mut slot_of = names.iter().map(|(_, name)| keys::slot(name));
            let first = slot_of.next();
            if slot_of.any(|s| Some(s) != first) {
                return Err(CheckError::Invalid {
                    param: "keys",
                    reason: CROSS_SLOT,
                });
            }
        }
        let mut args = Args::default();
        args.num(self.exec.grace_ms);
        args.now(self.now(now_ns));
        args.num(cost);
        args.num(u64::try_from(limits.len()).unwrap_or(u64::MAX));
        for (slot, rule) in slots.iter().zip(&rules) {
            args.num(u64::try_from(*slot).unwrap_or(u64::MAX));
            rule.write(&mut args);
        }
        let mut call = self.exec.prepare(Entry::Multi, names.len());
        for (_, name) in &names {
            call.key(name);
        }
        args.apply_to(&mut call);
        let value = self.exec.call(&call).await?;
        let rules: Vec<&Rule> = limits.iter().map(|(_, r)| r).collect();
        reply::decisions(value, &rules)
    }
}

impl Store for RedisStore {
    /// A scoped key's record is named by its bytes ([`ScopedKey::record`]).
    async fn apply(
        &self,
        key: ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        self.inner.apply(&key.record(rule), rule, op, now_ns).await
    }

    async fn check_all(
        &self,
        limits: ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        self.inner.check_all(&limits.records(), cost, now_ns).await
    }

    fn ping(&self) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.inner.exec.ping()
    }

    /// One part per Cluster primary (up to 64, `shards.rs`); 1 for one node or Sentinel.
    fn parts(&self) -> usize {
        match &self.inner.exec.shards {
            Some(_) => shards::PARTS,
            None => 1,
        }
    }

    /// On a Cluster, the part of the primary serving `key`'s slot (as last read).
    fn part_of(&self, key: ScopedKey<'_>, rule: &Rule) -> usize {
        match &self.inner.exec.shards {
            Some(shards) => {
                let name = keys::record_key(&self.inner.prefix, &key.record(rule));
                shards.part_of_slot(keys::slot_number(&name))
            }
            None => 0,
        }
    }

    /// On a Cluster, a PING of the node serving part `part`'s slots now (the slot map read
    /// again first, so a promoted replica counts); the whole store otherwise. A part that
    /// answers after failing to has its node back: the Cluster connection is made anew,
    /// so calls reach that node at once rather than after redis-rs's own retries.
    async fn ping_part(&self, part: usize) -> Result<(), StoreError> {
        let exec = &self.inner.exec;
        match &exec.shards {
            Some(shards) => {
                if shards.ping(part).await? {
                    exec.link.renew();
                }
                Ok(())
            }
            None => exec.ping().await,
        }
    }
}

/// Whose clock decides: see the crate docs, "Whose clock".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TimeSource {
    /// Redis's own clock (`TIME` inside the script); `now_ns` passed to the store is
    /// ignored. The default: skew between application servers does not matter.
    #[default]
    Store,
    /// The caller's clock, `now_ns` of each call (passed in `ARGV`). What tests use, with
    /// a manual clock.
    Process,
}
