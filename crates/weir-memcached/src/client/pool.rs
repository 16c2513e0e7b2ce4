//! A small bounded pool of memcached connections, and the timeout every call runs under.
//! Each call borrows one connection for one pipelined exchange (one round trip); at most
//! `size` calls are in flight, the rest wait (inside their timeout). A connection that failed
//! in any way is dropped, and so are the idle ones (they most likely share its fate, e.g.
//! after a restart), so an outage costs one failed call per caller, never a hang.

use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Semaphore;
use weir_core::StoreError;

use super::conn::Conn;
use super::protocol::{Command, Reply};

/// The pool.
#[derive(Debug)]
pub(crate) struct Pool {
    addr: String,
    timeout: Duration,
    permits: Semaphore,
    idle: Mutex<Vec<Conn>>,
}

impl Pool {
    /// A pool of at most `size` connections to `addr`; nothing connects until the first call.
    pub(crate) fn new(addr: String, size: usize, timeout: Duration) -> Self {
        Self {
            addr,
            timeout,
            permits: Semaphore::new(size.max(1)),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Runs `commands` in one round trip, within the timeout.
    pub(crate) async fn run(&self, commands: &[Command]) -> Result<Vec<Reply>, StoreError> {
        match tokio::time::timeout(self.timeout, self.run_unbounded(commands)).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout {
                timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
            }),
        }
    }

    /// Runs one command and returns its reply.
    pub(crate) async fn one(&self, command: Command) -> Result<Reply, StoreError> {
        let mut replies = self.run(std::slice::from_ref(&command)).await?;
        replies
            .pop()
            .ok_or_else(|| StoreError::Unavailable("memcached: a reply is missing".to_owned()))
    }

    async fn run_unbounded(&self, commands: &[Command]) -> Result<Vec<Reply>, StoreError> {
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| StoreError::Unavailable("memcached pool closed".to_owned()))?;
        let reused = self.idle.lock().map(|mut idle| idle.pop()).unwrap_or(None);
        let mut conn = match reused {
            Some(conn) => conn,
            None => Conn::connect(&self.addr).await?,
        };
        // If this future is dropped (timeout), `conn` is dropped with it: a half-read reply
        // can never be mistaken for the next call's.
        match conn.exchange(commands).await {
            Ok(replies) => {
                if let Ok(mut idle) = self.idle.lock() {
                    idle.push(conn);
                }
                Ok(replies)
            }
            Err(e) => {
                if let Ok(mut idle) = self.idle.lock() {
                    idle.clear();
                }
                Err(e)
            }
        }
    }
}
