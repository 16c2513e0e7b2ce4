//! [`RedisStore`]: the [`Store`] whose records live in Redis. Each call validates and
//! encodes on this side (`encode.rs`), names the key (`keys.rs`), runs one script in one
//! round trip under a timeout (`connection.rs`), and reads the reply (`reply.rs`).

use std::sync::Arc;
use std::time::Duration;

use redis::{ScriptInvocation, Value};
use weir_core::{CheckError, Decisions, Key, Op, Outcome, Rule, Store, StoreError};

use crate::builder::TimeSource;
use crate::connection::Link;
use crate::url::Redactor;
use crate::{encode, error, keys, reply, scripts};

/// A rate-limit store in Redis or Valkey: single node, Sentinel or Cluster.
///
/// Cheap to clone: clones share the connection. See the crate docs for the design and
/// [`RedisStoreBuilder`](crate::RedisStoreBuilder) for the options.
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) link: Link,
    pub(crate) redactor: Redactor,
    pub(crate) prefix: String,
    pub(crate) timeout: Duration,
    pub(crate) time: TimeSource,
    pub(crate) grace_ms: u64,
    pub(crate) cluster: bool,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore")
            .field("prefix", &self.inner.prefix)
            .field("timeout", &self.inner.timeout)
            .field("time", &self.inner.time)
            .field("cluster", &self.inner.cluster)
            .finish_non_exhaustive()
    }
}

const CROSS_SLOT: &str = "must share one hash slot on a Redis Cluster: give the keys of one \
                          check_all a common hash tag, such as `{user-7}`";

impl Inner {
    /// ARGV 1..=3: now (empty for the store clock) and the TTL grace.
    fn clock_args(&self, inv: &mut ScriptInvocation<'_>, now_ns: u64) {
        match self.time {
            TimeSource::Store => inv.arg("").arg(""),
            TimeSource::Process => {
                let (sec, nsec) = encode::now(now_ns);
                inv.arg(sec).arg(nsec)
            }
        };
        inv.arg(self.grace_ms);
    }

    /// Runs a script in one round trip, under the timeout.
    async fn run(&self, inv: &ScriptInvocation<'_>) -> Result<Value, StoreError> {
        let call = async {
            let (generation, mut conn) = self
                .link
                .get()
                .await
                .map_err(|e| error::store(&e, &self.redactor, self.timeout))?;
            match conn.invoke(inv).await {
                Ok(value) => {
                    self.link.succeeded();
                    Ok(value)
                }
                Err(e) => {
                    self.link.failed(generation, &e);
                    Err(error::store(&e, &self.redactor, self.timeout))
                }
            }
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => {
                self.link.timed_out();
                Err(error::timeout(self.timeout))
            }
        }
    }

    async fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let (code, n, holder) = encode::op_args(rule, &op, now_ns)?;
        let args = encode::rule_args(rule)?;
        let mut inv = scripts::single(args.tag).prepare_invoke();
        inv.key(keys::record_key(&self.prefix, key));
        self.clock_args(&mut inv, now_ns);
        inv.arg(code).arg(n).arg(holder);
        args.write(&mut inv);
        let value = self.run(&inv).await?;
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
        let args = limits
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
        let mut inv = scripts::multi().prepare_invoke();
        for (_, name) in &names {
            inv.key(name.as_slice());
        }
        self.clock_args(&mut inv, now_ns);
        inv.arg(cost).arg(limits.len());
        for (slot, rule_args) in slots.iter().zip(&args) {
            inv.arg(*slot);
            rule_args.write(&mut inv);
        }
        let value = self.run(&inv).await?;
        let rules: Vec<&Rule> = limits.iter().map(|(_, r)| r).collect();
        reply::decisions(value, &rules)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        let call = async {
            let (generation, mut conn) = self
                .link
                .get()
                .await
                .map_err(|e| error::store(&e, &self.redactor, self.timeout))?;
            conn.ping().await.map_err(|e| {
                self.link.failed(generation, &e);
                error::store(&e, &self.redactor, self.timeout)
            })
        };
        match tokio::time::timeout(self.timeout, call).await {
            Ok(result) => result,
            Err(_) => {
                self.link.timed_out();
                Err(error::timeout(self.timeout))
            }
        }
    }
}

impl Store for RedisStore {
    fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Outcome, CheckError>> + Send {
        self.inner.apply(key, rule, op, now_ns)
    }

    fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> impl std::future::Future<Output = Result<Decisions, CheckError>> + Send {
        self.inner.check_all(limits, cost, now_ns)
    }

    fn ping(&self) -> impl std::future::Future<Output = Result<(), StoreError>> + Send {
        self.inner.ping()
    }
}
