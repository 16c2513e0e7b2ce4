//! A small fixed set of shared connections to one memcached (a store has one pool per server:
//! `context.rs`), and the timeout every call runs under.
//! Each call picks the next connection in turn and pipelines its commands on it (one round
//! trip), beside whatever other calls have in flight there (`conn.rs`): no call waits for
//! another to finish, and the calls queued meanwhile go out in one write. The round trips of
//! one decision need not share a connection (a `cas` unique is the item's, not the
//! connection's). A connection is made on first use and replaced once dead: after any error
//! on it (which fails the calls in flight on it), and after a call on it timed out (whatever
//! it waited for may never come; the calls in flight on it finish or time out, and it closes
//! when the last lets go), so an outage costs one failed call per caller, never a hang.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weir_core::StoreError;

use super::conn::Conn;
use super::protocol::{Command, Reply};

/// The pool.
#[derive(Debug)]
pub(crate) struct Pool {
    addr: String,
    timeout: Duration,
    slots: Vec<Slot>,
    next: AtomicUsize,
}

/// One connection of the pool, made when first needed.
#[derive(Debug, Default)]
struct Slot {
    conn: Mutex<Option<Arc<Conn>>>,
    /// Held while connecting, so that the callers of a slot make one connection, not many.
    connecting: tokio::sync::Mutex<()>,
}

impl Slot {
    fn live(&self) -> Option<Arc<Conn>> {
        let conn = self.conn.lock().ok()?;
        conn.as_ref().filter(|c| c.is_alive()).cloned()
    }
}

impl Pool {
    /// A pool of `size` connections to `addr`; nothing connects until the first call.
    pub(crate) fn new(addr: String, size: usize, timeout: Duration) -> Self {
        Self {
            addr,
            timeout,
            slots: (0..size.max(1)).map(|_| Slot::default()).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Runs `commands` in one round trip, within the timeout.
    pub(crate) async fn run(&self, commands: &[Command]) -> Result<Vec<Reply>, StoreError> {
        let mut used = None;
        let result =
            tokio::time::timeout(self.timeout, self.run_unbounded(commands, &mut used)).await;
        match result {
            // Name the server (one of several, maybe) unless the message does.
            Ok(Err(StoreError::Unavailable(msg))) if !msg.contains(&self.addr) => Err(
                StoreError::Unavailable(format!("{msg} (server {})", self.addr)),
            ),
            Ok(result) => result,
            Err(_) => {
                let err = StoreError::Timeout {
                    timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
                };
                if let Some(conn) = used {
                    conn.retire();
                }
                Err(err)
            }
        }
    }

    /// Runs one command and returns its reply.
    pub(crate) async fn one(&self, command: Command) -> Result<Reply, StoreError> {
        let mut replies = self.run(std::slice::from_ref(&command)).await?;
        replies
            .pop()
            .ok_or_else(|| StoreError::Unavailable("memcached: a reply is missing".to_owned()))
    }

    async fn run_unbounded(
        &self,
        commands: &[Command],
        used: &mut Option<Arc<Conn>>,
    ) -> Result<Vec<Reply>, StoreError> {
        if commands.is_empty() {
            return Ok(Vec::new());
        }
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        let slot = self
            .slots
            .get(slot)
            .ok_or_else(|| StoreError::Unavailable("memcached pool is empty".to_owned()))?;
        let conn = self.conn(slot).await?;
        *used = Some(conn.clone());
        let sent = match conn.send(commands) {
            Ok(sent) => sent,
            // It died since it was picked (its tasks may also have ended with the runtime
            // they ran on): nothing was sent, so one fresh connection may take the call.
            Err(_) => {
                let conn = self.conn(slot).await?;
                *used = Some(conn.clone());
                conn.send(commands)?
            }
        };
        sent.replies().await
    }

    /// The slot's connection, made anew if it has none or its connection is dead.
    async fn conn(&self, slot: &Slot) -> Result<Arc<Conn>, StoreError> {
        if let Some(conn) = slot.live() {
            return Ok(conn);
        }
        let _connecting = slot.connecting.lock().await;
        if let Some(conn) = slot.live() {
            return Ok(conn);
        }
        let conn = Arc::new(Conn::connect(&self.addr).await?);
        if let Ok(mut current) = slot.conn.lock() {
            *current = Some(conn.clone());
        }
        Ok(conn)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use weir_testkit::servers::Memcached;

    /// Many calls in flight at once on one connection: each gets its own replies.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn pipelined_calls_get_their_own_replies() {
        let server = Memcached::start();
        let pool = Arc::new(Pool::new(
            format!("127.0.0.1:{}", server.port()),
            1,
            Duration::from_secs(5),
        ));
        let calls = (0..200u64).map(|i| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let key = format!("pipelined:{i}");
                let added = pool
                    .one(Command::Add {
                        key: key.clone(),
                        ttl_s: 60,
                        data: i.to_string().into_bytes(),
                    })
                    .await
                    .unwrap();
                assert_eq!(added, Reply::Stored);
                let replies = pool
                    .run(&[
                        Command::Incr {
                            key: key.clone(),
                            delta: i,
                        },
                        Command::Gets(vec![key.clone()]),
                    ])
                    .await
                    .unwrap();
                let [Reply::Number(n), Reply::Values(values)] = replies.as_slice() else {
                    panic!("{replies:?}");
                };
                assert_eq!(*n, 2 * i);
                assert_eq!(values.len(), 1);
                assert_eq!(values[0].key, key);
                assert_eq!(values[0].data, (2 * i).to_string().into_bytes());
            })
        });
        for call in calls.collect::<Vec<_>>() {
            call.await.unwrap();
        }
    }
}
