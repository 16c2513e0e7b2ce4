//! One script call: connect if needed, `FCALL` of Weir's function library (loading it on
//! "function not found"), or `EVALSHA` of the entry point's script on a server without
//! functions (Redis 6.2) or for a user whose ACL refuses them (loading the script on
//! `NOSCRIPT`), all under the store's timeout,
//! with every failure mapped to a [`StoreError`]. Shared by direct calls (`store.rs`) and
//! batches (`batch.rs`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use redis::{RedisError, Value};
use weir_core::StoreError;

use crate::call::Call;
use crate::connection::{Conn, Link};
use crate::encode::Args;
use crate::error;
use crate::redact::Redactor;
use crate::scripts::{self, Entry, Path, Tag};
use crate::shards::Shards;

/// What every call needs: the connection, how to scrub messages, the time bound, and which
/// scripts to run how.
pub(crate) struct Exec {
    pub(crate) link: Link,
    pub(crate) redactor: Redactor,
    pub(crate) timeout: Duration,
    /// The bound of calls until the store has answered once (connecting, a Cluster's slot
    /// map, the function library on each node): at least `timeout`.
    pub(crate) first_timeout: Duration,
    /// Set by the first call that returns: from then on calls are bound by `timeout`.
    pub(crate) answered: AtomicBool,
    /// A Cluster's slot → part table (`shards.rs`); none for one node or Sentinel.
    pub(crate) shards: Option<Arc<Shards>>,
    /// The connection generation whose slot map was last read into `shards`.
    pub(crate) mapped: AtomicU64,
    pub(crate) grace_ms: u64,
    /// The scripts: with the fast path (always, but in tests of the general path).
    pub(crate) path: Path,
    /// Set once the server has answered that it has no functions, or that this user may
    /// not use them (or in tests of the `EVALSHA` form): every call is then an `EVALSHA`.
    pub(crate) eval: AtomicBool,
}

/// The server has functions but not (yet) Weir's library: a new or restarted node.
fn function_missing(err: &RedisError) -> bool {
    err.to_string().contains("Function not found")
}

/// The server has no functions at all (before Redis 7), or this user may not call or load
/// them (an ACL that allows scripts only): `EVALSHA` from then on.
fn functions_unavailable(err: &RedisError) -> bool {
    // redis-rs writes NOPERM as "NoPerm".
    let message = err.to_string().to_ascii_lowercase();
    message.contains("unknown command")
        || (message.contains("noperm")
            && (message.contains("fcall") || message.contains("function")))
}

/// Refuses to start outside a Tokio runtime, where timers (and redis-rs) would panic.
pub(crate) fn in_runtime() -> Result<(), StoreError> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| StoreError::Unavailable("weir-redis must run inside a Tokio runtime".into()))
}

impl Exec {
    /// A call of `entry` with `keys` keys, to be given its keys then its arguments.
    pub(crate) fn prepare(&self, entry: Entry, keys: usize) -> Call {
        let mut cmd = redis::cmd("FCALL");
        cmd.arg(scripts::scripts(self.path).function(entry))
            .arg(keys);
        Call { entry, cmd }
    }

    /// Runs a script in one round trip, under the timeout.
    pub(crate) async fn call(&self, call: &Call) -> Result<Value, StoreError> {
        self.bounded(self.invoke(call)).await
    }

    /// Runs a script in one round trip, for a caller that bounds the wait itself. The
    /// call's future (redis-rs's script invocation, a large state machine) is boxed, so
    /// that the futures of the callers that hold it stay small: moving them (into a
    /// timeout, a task) copies them.
    pub(crate) async fn invoke(&self, call: &Call) -> Result<Value, StoreError> {
        Box::pin(async {
            let (generation, mut conn) = self
                .link
                .get()
                .await
                .map_err(|e| error::store(&e, &self.redactor, self.timeout))?;
            self.map_slots(generation);
            match self.run(&mut conn, call).await {
                Ok(value) => {
                    self.link.succeeded();
                    Ok(value)
                }
                Err(e) => {
                    self.link.failed(generation, &e);
                    Err(error::store(&e, &self.redactor, self.timeout))
                }
            }
        })
        .await
    }

    /// On a Cluster connection not seen before (the first, or one made again after
    /// failures), reads the slot map into the part table, in the background: the call
    /// does not wait for it.
    fn map_slots(&self, generation: u64) {
        let Some(shards) = &self.shards else {
            return;
        };
        if self.mapped.load(Ordering::Relaxed) == generation
            || self.mapped.swap(generation, Ordering::Relaxed) == generation
        {
            return;
        }
        let shards = Arc::clone(shards);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                // Not read (no node answered): the parts stay as they were, and the next
                // PING of a failing part reads the map again.
                let _ = shards.refresh(None).await;
            });
        }
    }

    /// `FCALL`, loading the library if the server lacks it; `EVALSHA` (loading the script
    /// if the server lacks it) on a server without functions.
    async fn run(&self, conn: &mut Conn, call: &Call) -> redis::RedisResult<Value> {
        let scripts = scripts::scripts(self.path);
        if !self.eval.load(Ordering::Relaxed) {
            match conn.query(&call.cmd).await {
                Err(e) if function_missing(&e) => {
                    let mut load = redis::cmd("FUNCTION");
                    load.arg("LOAD").arg("REPLACE").arg(scripts.library());
                    match conn.query(&load).await {
                        Ok(_) => return conn.query(&call.cmd).await,
                        Err(e) if functions_unavailable(&e) => {
                            self.eval.store(true, Ordering::Relaxed);
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(e) if functions_unavailable(&e) => self.eval.store(true, Ordering::Relaxed),
                result => return result,
            }
        }
        let source = scripts.script(call.entry);
        let eval = call.evalsha(&source.hash);
        match conn.query(&eval).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                let mut load = redis::cmd("SCRIPT");
                load.arg("LOAD").arg(&source.text);
                conn.query(&load).await?;
                conn.query(&eval).await
            }
            result => result,
        }
    }

    /// One operation on the record `name` as a call of the single entry point under its
    /// algorithm (`tag`); `timed` is `now` then the operation block (ARGV from 2 on).
    pub(crate) fn single(&self, tag: Tag, name: &[u8], timed: &Args) -> Call {
        let mut call = self.prepare(Entry::One(tag), 1);
        call.key(name).arg(self.grace_ms);
        timed.apply_to(&mut call);
        call
    }

    /// PING, under the timeout.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
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
        self.bounded(call).await
    }

    /// `fut` under the store's timeout (the first-contact timeout until a call has
    /// returned); a timeout counts towards replacing the connection.
    pub(crate) async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        in_runtime()?;
        let limit = if self.answered.load(Ordering::Relaxed) {
            self.timeout
        } else {
            self.timeout.max(self.first_timeout)
        };
        match tokio::time::timeout(limit, fut).await {
            Ok(result) => {
                if result.is_ok() && !self.answered.load(Ordering::Relaxed) {
                    self.answered.store(true, Ordering::Relaxed);
                }
                result
            }
            Err(_) => {
                self.link.timed_out();
                Err(error::timeout(limit))
            }
        }
    }
}
