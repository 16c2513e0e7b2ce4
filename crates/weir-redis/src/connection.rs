//! The connection under every store call: one multiplexed connection (pipelining every
//! concurrent call) to a node or to the master Sentinel names, or redis-rs's Cluster
//! connection. Connected lazily on first use and replaced after it breaks (or after
//! repeated timeouts), so a Redis that restarts is used again without a new store.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use redis::aio::MultiplexedConnection;
use redis::cluster_async::ClusterConnection;
use redis::{AsyncConnectionConfig, Cmd, RedisResult, Value};

use crate::url::Target;

/// Consecutive timeouts after which a node connection is dropped and made anew.
const TIMEOUTS_BEFORE_RECONNECT: u32 = 3;
/// Failures (errors or timeouts, consecutive or not) after which a Cluster connection is
/// made anew, re-reading the slot map from the seed nodes. redis-rs re-reads it only on a
/// `MOVED` reply, which a dead primary never sends, so without this a failover would go
/// unnoticed.
const CLUSTER_FAILURES_BEFORE_RECONNECT: u32 = 3;

/// A live connection, cheap to clone (clones share the socket).
#[derive(Clone)]
pub(crate) enum Conn {
    Node(MultiplexedConnection),
    Cluster(ClusterConnection),
}

impl Conn {
    /// Sends one command (routed by its key, or to every primary, on a Cluster).
    pub(crate) async fn query(&mut self, cmd: &Cmd) -> RedisResult<Value> {
        match self {
            Self::Node(c) => cmd.query_async(c).await,
            Self::Cluster(c) => cmd.query_async(c).await,
        }
    }

    /// PING (every primary, on a Cluster).
    pub(crate) async fn ping(&mut self) -> RedisResult<()> {
        let ping = redis::cmd("PING");
        match self {
            Self::Node(c) => ping.query_async::<Value>(c).await.map(|_| ()),
            Self::Cluster(c) => ping.query_async::<Value>(c).await.map(|_| ()),
        }
    }
}

/// The store's connection, made on demand.
pub(crate) struct Link {
    target: Target,
    config: AsyncConnectionConfig,
    current: Mutex<Option<(u64, Conn)>>,
    connecting: tokio::sync::Mutex<()>,
    generation: AtomicU64,
    timeouts: AtomicU32,
}

impl Link {
    pub(crate) fn new(target: Target, config: AsyncConnectionConfig) -> Self {
        Self {
            target,
            config,
            current: Mutex::new(None),
            connecting: tokio::sync::Mutex::new(()),
            generation: AtomicU64::new(0),
            timeouts: AtomicU32::new(0),
        }
    }

    fn cached(&self) -> Option<(u64, Conn)> {
        self.current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The current connection and its generation, connecting if there is none.
    pub(crate) async fn get(&self) -> RedisResult<(u64, Conn)> {
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let _one_at_a_time = self.connecting.lock().await;
        if let Some(c) = self.cached() {
            return Ok(c);
        }
        let conn = match &self.target {
            Target::Node(client) => Conn::Node(
                client
                    .get_multiplexed_async_connection_with_config(&self.config)
                    .await?,
            ),
            Target::Sentinel(sentinel) => {
                // Ask the sentinels for the master each time a connection is made, so a
                // failover is followed on the next reconnect.
                let mut sentinel = sentinel.lock().await;
                Conn::Node(
                    sentinel
                        .get_async_connection_with_config(&self.config)
                        .await?,
                )
            }
            Target::Cluster(client, _) => Conn::Cluster(client.get_async_connection().await?),
        };
        let generation = self.generation.fetch_add(1, Ordering::Relaxed) + 1;
        self.timeouts.store(0, Ordering::Relaxed);
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((generation, conn.clone()));
        Ok((generation, conn))
    }

    fn drop_generation(&self, generation: u64) {
        let mut current = self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.as_ref().is_some_and(|(g, _)| *g == generation) {
            *current = None;
        }
    }

    fn cluster(&self) -> bool {
        matches!(self.target, Target::Cluster(..))
    }

    /// A Cluster call failed or timed out: after a few, re-read the topology.
    fn cluster_failure(&self) {
        if self.timeouts.fetch_add(1, Ordering::Relaxed) + 1 >= CLUSTER_FAILURES_BEFORE_RECONNECT {
            self.renew();
        }
    }

    /// Drops the connection, so the next call makes it anew (on a Cluster: reading the slot
    /// map and connecting to every node again). Calls in flight keep theirs.
    pub(crate) fn renew(&self) {
        self.timeouts.store(0, Ordering::Relaxed);
        *self
            .current
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }

    /// A call succeeded.
    pub(crate) fn succeeded(&self) {
        if !self.cluster() {
            self.timeouts.store(0, Ordering::Relaxed);
        }
    }

    /// A call on `generation` failed: drop the connection if it is broken (or, behind
    /// Sentinel, talks to a node that is no longer the master). A Cluster connection
    /// repairs single nodes itself, but is made anew after a few failures.
    pub(crate) fn failed(&self, generation: u64, err: &redis::RedisError) {
        if self.cluster() {
            self.cluster_failure();
            return;
        }
        let read_only = err.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly);
        if err.is_unrecoverable_error()
            || err.is_connection_dropped()
            || err.is_io_error()
            || read_only
        {
            self.drop_generation(generation);
        }
    }

    /// A call timed out: after a few in a row, the connection is presumed dead (a
    /// half-open socket never errors) and made anew.
    pub(crate) fn timed_out(&self) {
        if self.cluster() {
            self.cluster_failure();
            return;
        }
        if self.timeouts.fetch_add(1, Ordering::Relaxed) + 1 >= TIMEOUTS_BEFORE_RECONNECT {
            self.renew();
        }
    }
}
