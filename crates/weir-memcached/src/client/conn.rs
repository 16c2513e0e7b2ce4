//! One TCP connection to memcached, shared by every call that picks it (pipelining): a call
//! hands its commands, already encoded, to the connection's writer task and waits for its
//! replies; the writer sends everything queued since its last write in one write, and the
//! reader task reads the replies in the order the commands went out and hands each call its
//! own. memcached runs one connection's commands in order, so a call's commands stay in
//! order and back to back, as in a dedicated connection.
//!
//! Knows nothing of pooling or timeouts (`pool.rs`). Any error (a write or read that fails,
//! a reply that is not what was asked for) kills the connection: every call in flight on it
//! fails with that error (their replies can no longer be told apart), and the pool replaces
//! it. A connection can also be retired (no new calls); dropping it ends both tasks and
//! closes the socket.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;
use weir_core::StoreError;

use super::protocol::{read_reply, Command, Kind, Reply};

/// The most bytes the writer gathers into one write (more waits for the next one).
const MAX_WRITE: usize = 64 * 1024;

/// The replies to one call, or why there are none.
type Replies = Result<Vec<Reply>, StoreError>;

/// A live connection: the way in to its writer task, and both tasks' handles.
#[derive(Debug)]
pub(crate) struct Conn {
    requests: mpsc::UnboundedSender<Request>,
    shared: Arc<Shared>,
    writer: AbortHandle,
    reader: AbortHandle,
}

/// What the tasks and the calls share: whether the connection is dead, and why.
#[derive(Debug, Default)]
struct Shared {
    dead: AtomicBool,
    failure: OnceLock<StoreError>,
}

impl Shared {
    /// Marks the connection dead; the first reason given is the one reported.
    fn fail(&self, why: StoreError) {
        let _ = self.failure.set(why);
        self.dead.store(true, Ordering::Release);
    }

    fn error(&self) -> StoreError {
        self.failure.get().cloned().unwrap_or_else(lost)
    }
}

fn lost() -> StoreError {
    StoreError::Unavailable("memcached connection lost".to_owned())
}

/// One call, on its way to the writer.
#[derive(Debug)]
struct Request {
    bytes: Vec<u8>,
    waiting: Waiting,
}

/// One call whose commands are written, waiting for its replies.
#[derive(Debug)]
struct Waiting {
    kinds: Vec<Kind>,
    reply: oneshot::Sender<Replies>,
}

/// A call sent on a connection: await it for the replies.
pub(crate) struct Sent {
    reply: oneshot::Receiver<Replies>,
    shared: Arc<Shared>,
}

impl Sent {
    /// The replies, one per command, in order.
    pub(crate) async fn replies(self) -> Replies {
        match self.reply.await {
            Ok(replies) => replies,
            // The connection died (and its tasks with it) before answering this call.
            Err(_) => Err(self.shared.error()),
        }
    }
}

impl Conn {
    /// Connects to `addr` (`host:port`) and starts the connection's two tasks (on the
    /// current tokio runtime).
    pub(crate) async fn connect(addr: &str) -> Result<Self, StoreError> {
        let stream = TcpStream::connect(addr).await.map_err(|e| {
            StoreError::Unavailable(format!("cannot connect to memcached at {addr}: {e}"))
        })?;
        stream
            .set_nodelay(true)
            .map_err(|e| StoreError::Unavailable(format!("memcached socket: {e}")))?;
        let (read, write) = stream.into_split();
        let shared = Arc::new(Shared::default());
        let (requests, incoming) = mpsc::unbounded_channel();
        let (written, waiting) = mpsc::unbounded_channel();
        let reader =
            tokio::spawn(read_loop(BufReader::new(read), waiting, shared.clone())).abort_handle();
        let writer = tokio::spawn(write_loop(
            write,
            incoming,
            written,
            shared.clone(),
            reader.clone(),
        ))
        .abort_handle();
        Ok(Self {
            requests,
            shared,
            writer,
            reader,
        })
    }

    /// Whether the connection can still take calls.
    pub(crate) fn is_alive(&self) -> bool {
        !self.shared.dead.load(Ordering::Acquire)
            && !self.writer.is_finished()
            && !self.reader.is_finished()
    }

    /// Retires the connection (after a call on it timed out: whatever that call waited for
    /// may never come, and every call behind it waits for it). It takes no new calls; the
    /// calls in flight on it still get their replies, or time out themselves, and the last
    /// one to let go of it closes it (`Drop`).
    pub(crate) fn retire(&self) {
        self.shared.dead.store(true, Ordering::Release);
    }

    /// Queues `commands` (at least one) for the next write; nothing is awaited here.
    /// Fails only if the connection is already dead, in which case nothing was sent.
    pub(crate) fn send(&self, commands: &[Command]) -> Result<Sent, StoreError> {
        if !self.is_alive() {
            return Err(self.shared.error());
        }
        let mut bytes = Vec::with_capacity(64 * commands.len());
        let mut kinds = Vec::with_capacity(commands.len());
        for command in commands {
            command.encode(&mut bytes);
            kinds.push(command.kind());
        }
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(Request {
                bytes,
                waiting: Waiting { kinds, reply },
            })
            .map_err(|_| self.shared.error())?;
        Ok(Sent {
            reply: answer,
            shared: self.shared.clone(),
        })
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.writer.abort();
        self.reader.abort();
    }
}

/// Writes every request queued since the last write in one write, handing each to the
/// reader first (so it knows which replies come next). Ends when the connection is dropped
/// or a write fails (which kills the reader too: the replies it waits for may never come).
async fn write_loop(
    mut out: OwnedWriteHalf,
    mut incoming: mpsc::UnboundedReceiver<Request>,
    written: mpsc::UnboundedSender<Waiting>,
    shared: Arc<Shared>,
    reader: AbortHandle,
) {
    let mut buf = Vec::with_capacity(4096);
    while let Some(first) = incoming.recv().await {
        buf.clear();
        let mut next = Some(first);
        while let Some(Request { bytes, waiting }) = next {
            buf.extend_from_slice(&bytes);
            if written.send(waiting).is_err() {
                // The reader is gone, having recorded why.
                shared.fail(lost());
                return;
            }
            next = if buf.len() < MAX_WRITE {
                incoming.try_recv().ok()
            } else {
                None
            };
        }
        if let Err(e) = out.write_all(&buf).await {
            shared.fail(StoreError::Unavailable(format!("memcached write: {e}")));
            reader.abort();
            return;
        }
    }
}

/// Reads the replies to each written call, in order, and hands them over. On the first
/// error the connection is dead: the call being read gets the error, and the calls behind
/// it get it too (their waiting ends are dropped with this task's queue).
async fn read_loop(
    mut input: BufReader<OwnedReadHalf>,
    mut waiting: mpsc::UnboundedReceiver<Waiting>,
    shared: Arc<Shared>,
) {
    while let Some(Waiting { kinds, reply }) = waiting.recv().await {
        let mut replies = Vec::with_capacity(kinds.len());
        for kind in kinds {
            match read_reply(&mut input, kind).await {
                Ok(r) => replies.push(r),
                Err(e) => {
                    shared.fail(e.clone());
                    let _ = reply.send(Err(e));
                    return;
                }
            }
        }
        // The caller may have given up (its timeout); its replies are read all the same,
        // so the stream stays in step.
        let _ = reply.send(Ok(replies));
    }
}
