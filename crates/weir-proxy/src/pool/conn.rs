//! One upstream connection ([`Conn`]): hyper's request half and connection, driven by the
//! task that holds it through its [`Relay`] waker, so the hand-overs of one exchange are
//! polled for at once rather than sent through tokio's scheduler. The pool (`pool.rs`)
//! checks connections out and in; `exchange.rs` sends a request on one.

use std::future::Future as _;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use hyper::client::conn::http1::{Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::body::Outbound;

use super::deadline::Deadline;

/// One upstream connection: the request half and the connection itself, driven by whoever
/// holds it, always through its [`Relay`].
pub(super) struct Conn {
    /// Boxed once per connection, so that a response body holding its connection stays
    /// small (hyper's connection state is most of a kilobyte) and is moved cheaply.
    pub(super) io: Box<ConnIo>,
    pub(super) relay: Arc<Relay>,
    /// The relay as a waker (made once per connection).
    waker: Waker,
    /// Idle in the pool since (the clock's nanoseconds).
    pub(super) idle_since_ns: u64,
}

/// What a connection's polls touch.
pub(super) struct ConnIo {
    pub(super) sender: SendRequest<Outbound>,
    pub(super) connection: Connection<TokioIo<TcpStream>, Outbound>,
    /// The connection's future has finished: it is closed, never to be used again.
    pub(super) closed: bool,
    /// The upstream timeout's one timer, shared by the requests the connection carries.
    pub(super) deadline: Deadline,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("closed", &self.io.closed)
            .finish_non_exhaustive()
    }
}

impl ConnIo {
    /// Drives the connection (writes what is queued, reads what came); `true` once it is
    /// closed.
    pub(super) fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.closed && Pin::new(&mut self.connection).poll(cx).is_ready() {
            self.closed = true;
        }
        self.closed
    }
}

/// The most times [`Conn::poll_with`] polls again at once because the poll itself woke
/// the connection; past it the wake goes to the task (a yield).
const SELF_WAKES: usize = 8;

impl Conn {
    pub(super) fn new(
        sender: SendRequest<Outbound>,
        connection: Connection<TokioIo<TcpStream>, Outbound>,
    ) -> Self {
        let relay = Arc::new(Relay::default());
        Self {
            io: Box::new(ConnIo {
                sender,
                connection,
                closed: false,
                deadline: Deadline::default(),
            }),
            waker: Waker::from(Arc::clone(&relay)),
            relay,
            idle_since_ns: 0,
        }
    }

    /// Polls `f` (which drives the connection, or a future or a body of it) with the
    /// connection's relay as the waker: a wake-up that `f` itself causes (the connection
    /// handing the response head or a body chunk to this very task, or the body asking the
    /// connection for more) makes `f` run again at once instead of waking the task, which
    /// tokio would count as a yield (the task to the back of the queue and another worker
    /// unparked to steal it). Wake-ups from elsewhere (the socket) go to the task.
    pub(super) fn poll_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut f: impl FnMut(&mut ConnIo, &mut Context<'_>) -> Poll<T>,
    ) -> Poll<T> {
        self.relay.set_task(Some(cx.waker()));
        let mut relayed = Context::from_waker(&self.waker);
        let mut rounds = 0;
        loop {
            self.relay.begin();
            let poll = f(&mut self.io, &mut relayed);
            if !self.relay.end() {
                return poll;
            }
            rounds += 1;
            // Woken by itself: a ready answer is taken up by the caller (who polls the
            // body, which drives the connection), a pending one is polled again.
            if poll.is_ready() {
                return poll;
            }
            if rounds >= SELF_WAKES {
                cx.waker().wake_by_ref();
                return poll;
            }
        }
    }

    /// Runs `f` on the connection with its wake-ups held back: for what the caller polls
    /// right after.
    pub(super) fn quietly<T>(&mut self, f: impl FnOnce(&mut ConnIo) -> T) -> T {
        self.relay.begin();
        let value = f(&mut self.io);
        let _ = self.relay.end();
        value
    }

    /// Drives the connection; `true` once it is closed.
    pub(super) fn drive(&mut self, cx: &mut Context<'_>) -> bool {
        let _ = self.poll_with(cx, |io, cx| {
            io.drive(cx);
            Poll::<()>::Pending
        });
        self.io.closed
    }

    /// Whether it can take another request (driven once first, so a close already read is
    /// seen).
    pub(super) fn usable(&mut self, cx: &mut Context<'_>) -> bool {
        !self.drive(cx) && !self.io.sender.is_closed()
    }
}

/// The waker a connection is polled with: a wake-up during [`Conn::poll_with`] is noted
/// and polled for there; any other goes to the task that last polled the connection (none
/// while it is idle in the pool: nothing waits on it then).
#[derive(Debug, Default)]
pub(super) struct Relay {
    task: Mutex<Option<Waker>>,
    polling: AtomicBool,
    woken: AtomicBool,
}

impl Relay {
    /// The task woken from now on (`None`: no one).
    pub(super) fn set_task(&self, waker: Option<&Waker>) {
        if let Ok(mut task) = self.task.lock() {
            match (waker, &mut *task) {
                (Some(new), Some(old)) if old.will_wake(new) => {}
                (new, task) => *task = new.cloned(),
            }
        }
    }

    fn begin(&self) {
        self.woken.store(false, Ordering::SeqCst);
        self.polling.store(true, Ordering::SeqCst);
    }

    /// Whether a wake-up came during the poll.
    fn end(&self) -> bool {
        self.polling.store(false, Ordering::SeqCst);
        self.woken.swap(false, Ordering::SeqCst)
    }
}

impl Wake for Relay {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Noted first: a poll that ends after this sees it (and polls again).
        self.woken.store(true, Ordering::SeqCst);
        if self.polling.load(Ordering::SeqCst) {
            return;
        }
        let task = self.task.lock().ok().and_then(|task| task.clone());
        if let Some(task) = task {
            task.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts the wake-ups it gets.
    #[derive(Default)]
    struct Counting(AtomicUsize);

    impl Wake for Counting {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn the_relay_keeps_a_polls_own_wake_ups_and_passes_on_the_others() {
        let task = Arc::new(Counting::default());
        let task_waker = Waker::from(Arc::clone(&task));
        let relay = Arc::new(Relay::default());
        let relayed = Waker::from(Arc::clone(&relay));
        relay.set_task(Some(&task_waker));
        // During a poll: noted, not passed on.
        relay.begin();
        relayed.wake_by_ref();
        assert!(relay.end(), "the poll learns of its own wake-up");
        assert_eq!(task.0.load(Ordering::SeqCst), 0);
        // Outside one (the socket became ready): the task is woken.
        relayed.wake_by_ref();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
        relay.begin();
        assert!(!relay.end(), "a wake-up before the poll is not the poll's");
        // Idle in the pool: no one to wake.
        relay.set_task(None);
        relayed.wake_by_ref();
        assert_eq!(task.0.load(Ordering::SeqCst), 1);
    }
}
