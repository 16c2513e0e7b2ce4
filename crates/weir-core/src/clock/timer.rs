//! A timer for sleeps outside a tokio runtime (`futures::executor::block_on`, smol, a
//! hand-written executor): one helper thread, `weir-timer`, started on first use, waits on a
//! condition variable until the earliest deadline and wakes the futures that are due. A
//! sleep costs an entry in an ordered map, never a spinning poll; dropping the sleep removes
//! it.

use std::collections::BTreeMap;
use std::sync::{Condvar, Mutex, MutexGuard, OnceLock, PoisonError};
use std::task::{Context, Poll, Waker};
use std::thread;
use std::time::Instant;

/// Pending sleeps by (deadline, id): the first is the next to wake.
struct Queue {
    sleeps: BTreeMap<(Instant, u64), Waker>,
    next_id: u64,
}

struct Timer {
    queue: Mutex<Queue>,
    /// Signalled when a sleep becomes the earliest.
    earlier: Condvar,
}

static TIMER: Timer = Timer {
    queue: Mutex::new(Queue {
        sleeps: BTreeMap::new(),
        next_id: 0,
    }),
    earlier: Condvar::new(),
};

/// Whether the helper thread runs (false if the system refused to start it).
static RUNNING: OnceLock<bool> = OnceLock::new();

fn queue() -> MutexGuard<'static, Queue> {
    // Nothing panics while holding the lock; a poisoned queue is still consistent.
    TIMER.queue.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A sleep registered with the timer until `deadline`. Pending until the helper thread has
/// woken it; removed from the timer when dropped.
#[derive(Debug)]
pub(super) struct TimerSleep {
    key: (Instant, u64),
}

impl TimerSleep {
    /// Registers a sleep until `deadline`, to wake `waker`. `None` if the helper thread
    /// cannot be started.
    pub(super) fn register(deadline: Instant, waker: &Waker) -> Option<Self> {
        if !*RUNNING.get_or_init(start) {
            return None;
        }
        let mut queue = queue();
        let key = (deadline, queue.next_id);
        queue.next_id = queue.next_id.wrapping_add(1);
        let earliest = queue.sleeps.first_key_value().is_none_or(|(k, _)| key < *k);
        queue.sleeps.insert(key, waker.clone());
        if earliest {
            TIMER.earlier.notify_one();
        }
        Some(Self { key })
    }

    /// Ready once the helper thread has woken this sleep (its deadline passed).
    pub(super) fn poll(&mut self, cx: &Context<'_>) -> Poll<()> {
        match queue().sleeps.get_mut(&self.key) {
            Some(waker) => {
                waker.clone_from(cx.waker());
                Poll::Pending
            }
            None => Poll::Ready(()),
        }
    }
}

impl Drop for TimerSleep {
    fn drop(&mut self) {
        queue().sleeps.remove(&self.key);
    }
}

fn start() -> bool {
    thread::Builder::new()
        .name("weir-timer".into())
        .spawn(run)
        .is_ok()
}

/// The helper thread: wakes what is due, then waits for the next deadline or an earlier
/// sleep. Runs for the life of the process.
#[allow(clippy::disallowed_methods)] // the timer reads the monotonic clock it waits on
fn run() {
    let mut queue = queue();
    loop {
        let now = Instant::now();
        let later = queue.sleeps.split_off(&(now, u64::MAX));
        let due = std::mem::replace(&mut queue.sleeps, later);
        if !due.is_empty() {
            drop(queue);
            due.into_values().for_each(Waker::wake);
            queue = self::queue();
            continue;
        }
        queue = match queue.sleeps.first_key_value() {
            Some(((deadline, _), _)) => {
                let wait = deadline.saturating_duration_since(now);
                TIMER
                    .earlier
                    .wait_timeout(queue, wait)
                    .map(|(queue, _)| queue)
                    .unwrap_or_else(|poisoned| poisoned.into_inner().0)
            }
            None => TIMER
                .earlier
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner),
        };
    }
}
