//! One script call: connect if needed, `EVALSHA` (loading the script on `NOSCRIPT`), all
//! under the store's timeout, with every failure mapped to a [`StoreError`]. Shared by
//! direct calls (`store.rs`) and batches (`batch.rs`).

use std::time::Duration;

use redis::{ScriptInvocation, Value};
use weir_core::StoreError;

use crate::connection::Link;
use crate::encode::Args;
use crate::error;
use crate::scripts::{self, Tag};
use crate::url::Redactor;

/// What every call needs: the connection, how to scrub messages, and the time bound.
pub(crate) struct Exec {
    pub(crate) link: Link,
    pub(crate) redactor: Redactor,
    pub(crate) timeout: Duration,
    pub(crate) grace_ms: u64,
}

/// Refuses to start outside a Tokio runtime, where timers (and redis-rs) would panic.
pub(crate) fn in_runtime() -> Result<(), StoreError> {
    tokio::runtime::Handle::try_current()
        .map(|_| ())
        .map_err(|_| StoreError::Unavailable("weir-redis must run inside a Tokio runtime".into()))
}

impl Exec {
    /// Runs a script in one round trip, under the timeout.
    pub(crate) async fn call(&self, inv: &ScriptInvocation<'_>) -> Result<Value, StoreError> {
        self.bounded(self.invoke(inv)).await
    }

    /// Runs a script in one round trip, for a caller that bounds the wait itself. The
    /// call's future (redis-rs's script invocation, a large state machine) is boxed, so
    /// that the futures of the callers that hold it stay small: moving them (into a
    /// timeout, a task) copies them.
    pub(crate) async fn invoke(&self, inv: &ScriptInvocation<'_>) -> Result<Value, StoreError> {
        Box::pin(async {
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
        })
        .await
    }

    /// One operation on the record `name` as a call of its algorithm's single script;
    /// `timed` is `now` then the operation block (ARGV from 2 on).
    pub(crate) fn single(&self, tag: Tag, name: Vec<u8>, timed: Args) -> ScriptInvocation<'static> {
        let mut inv = scripts::single(tag).prepare_invoke();
        inv.key(name);
        inv.arg(self.grace_ms);
        timed.apply_to(&mut inv);
        inv
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

    /// `fut` under the store's timeout; a timeout counts towards replacing the connection.
    pub(crate) async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        in_runtime()?;
        match tokio::time::timeout(self.timeout, fut).await {
            Ok(result) => result,
            Err(_) => {
                self.link.timed_out();
                Err(error::timeout(self.timeout))
            }
        }
    }
}
