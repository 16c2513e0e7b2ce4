//! What every call of the store needs: the servers (each with its connection pool) and the
//! ring that places keys on them, the key prefix, the retry bound; and the round trips that
//! several steps share (reading names, pinging). The leaf the decision paths stand on:
//! `apply.rs`, `charge.rs`, `check_all.rs` and `exec.rs` import it, it imports none of them.
//!
//! Routing: every name of one key goes to the server the ring (`ring.rs`) picks for the
//! key's body, so one key's round trips, pipelined or not, all reach one memcached. Names
//! of several keys (only `check_all` has them) are split by server and read concurrently.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

use weir_core::{CheckError, Key, StoreError};

use crate::backoff::Backoff;
use crate::client::{Command, Pool, Reply, Value};
use crate::keys::{body_of, Names};
use crate::ring::Ring;

/// One memcached of the list.
#[derive(Debug)]
pub(crate) struct Server {
    /// `host:port`, as listed.
    pub addr: String,
    pub pool: Pool,
}

/// What every call needs.
#[derive(Debug)]
pub(crate) struct Inner {
    servers: Vec<Server>,
    ring: Ring,
    pub prefix: String,
    pub max_retries: u32,
    pub backoff: Backoff,
    /// Seconds memcached keeps a record past its freshness (`MemcachedStoreBuilder::ttl_grace`).
    pub ttl_grace_s: u32,
}

impl Inner {
    /// The context over `servers` (at least one, distinct names).
    pub(crate) fn new(servers: Vec<Server>, prefix: String, max_retries: u32) -> Self {
        let names: Vec<String> = servers.iter().map(|s| s.addr.clone()).collect();
        Self {
            ring: Ring::new(&names),
            servers,
            prefix,
            max_retries,
            backoff: Backoff::new(),
            ttl_grace_s: 0,
        }
    }

    fn at(&self, index: usize) -> Result<&Pool, StoreError> {
        self.servers
            .get(index)
            .map(|s| &s.pool)
            .ok_or_else(|| StoreError::Unavailable("memcached: no server is configured".into()))
    }

    /// The pool of the server that holds the key of `names`.
    pub(crate) fn pool(&self, names: &Names) -> Result<&Pool, StoreError> {
        self.at(self.ring.server(names.body()))
    }

    /// The index of the server that holds `name` (one of this store's names).
    fn server_of(&self, name: &str) -> Result<usize, StoreError> {
        if self.servers.len() == 1 {
            return Ok(0);
        }
        let body = body_of(&self.prefix, name).ok_or_else(|| {
            StoreError::Unavailable(format!("memcached: {name:?} is not a name of this store"))
        })?;
        Ok(self.ring.server(body))
    }

    /// The pool of the server that holds `name` (one of this store's names).
    pub(crate) fn pool_of(&self, name: &str) -> Result<&Pool, StoreError> {
        self.at(self.server_of(name)?)
    }

    /// Reads `names`, of any keys, in one `gets` per server, the servers concurrently.
    pub(crate) async fn read_all(
        &self,
        names: Vec<String>,
    ) -> Result<HashMap<String, Value>, StoreError> {
        let mut by_server: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for name in names {
            by_server
                .entry(self.server_of(&name)?)
                .or_default()
                .push(name);
        }
        let mut reads = Vec::with_capacity(by_server.len());
        for (index, names) in by_server {
            reads.push(read(self.at(index)?, names));
        }
        let mut values = HashMap::new();
        for read in join_all(reads).await {
            values.extend(read?);
        }
        Ok(values)
    }

    /// Asks every server for its version, concurrently: `Ok` only if each answers (a store
    /// with one server down is not healthy: that server's keys fail).
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        let pings = self.servers.iter().map(version);
        join_all(pings.collect()).await.into_iter().collect()
    }

    /// How many servers the list has.
    pub(crate) fn server_count(&self) -> usize {
        self.servers.len()
    }

    /// The index of the server that holds `key`'s names.
    pub(crate) fn server_of_key(&self, key: &Key) -> usize {
        if self.servers.len() == 1 {
            return 0;
        }
        self.ring.server(Names::new(&self.prefix, key).body())
    }

    /// Asks server `index` alone for its version.
    pub(crate) async fn ping_server(&self, index: usize) -> Result<(), StoreError> {
        let server = self.servers.get(index).ok_or_else(|| {
            StoreError::Unavailable(format!("memcached: no server number {index} in the list"))
        })?;
        version(server).await
    }
}

/// `Ok` if `server` answers a `version`.
async fn version(server: &Server) -> Result<(), StoreError> {
    match server.pool.one(Command::Version).await {
        Ok(Reply::Version(_)) => Ok(()),
        Ok(other) => Err(StoreError::Unavailable(format!(
            "memcached at {}: unexpected reply to version: {other:?}",
            server.addr
        ))),
        Err(e) => Err(e),
    }
}

/// Reads `names`, all held by the server of `pool`, in one `gets`.
pub(crate) async fn read(
    pool: &Pool,
    names: Vec<String>,
) -> Result<HashMap<String, Value>, StoreError> {
    to_map(pool.one(Command::Gets(names)).await?)
}

/// The values of a `gets` reply, by name.
pub(crate) fn to_map(reply: Reply) -> Result<HashMap<String, Value>, StoreError> {
    match reply {
        Reply::Values(values) => Ok(values.into_iter().map(|v| (v.key.clone(), v)).collect()),
        other => Err(StoreError::Unavailable(format!(
            "memcached: unexpected reply to gets: {other:?}"
        ))),
    }
}

/// The error after `max_retries` conflicts in a row.
pub(crate) fn contention(retries: u32) -> CheckError {
    CheckError::Store(StoreError::Unavailable(format!(
        "memcached: gave up after {retries} compare-and-swap conflicts in a row on a contended key"
    )))
}

/// Runs `futures` concurrently on the calling task; their outputs in order.
async fn join_all<F: Future>(futures: Vec<F>) -> Vec<F::Output> {
    let mut futures: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut outputs: Vec<Option<F::Output>> = futures.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (future, output) in futures.iter_mut().zip(outputs.iter_mut()) {
            if output.is_none() {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => *output = Some(value),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
