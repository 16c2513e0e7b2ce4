//! Telling a fail-closed denial from a real one. While the store is down, a rule with
//! `on_failure: fail_closed` is denied by [`FailoverStore`](crate::FailoverStore) without
//! the store: a `Decision` like any other (`allowed: false`, `remaining: 0`). The caller
//! that must say why (the engine: a reason in the answer, its own metrics outcome) runs
//! the check inside [`noting_failed_closed`], and every fail-closed denial made during it,
//! at any depth of the store stack, marks it. A task-local: the stack's calls run in the
//! caller's task (timeouts wrap them, nothing is spawned), and no `Store` signature or
//! `Decision` field changes for it.
//!
//! [`OverLimitCache`](crate::OverLimitCache) never caches a marked denial (it costs no store
//! call, and the store may return sooner than its `retry_after`), so every fail-closed
//! denial is marked, never answered from the cache as if it were a limit.

use std::cell::Cell;
use std::future::Future;

tokio::task_local! {
    static FAILED_CLOSED: Cell<bool>;
}

/// Runs `future` and says whether a fail-closed rule was denied during it because the
/// store was unavailable (the circuit open, or the call failing).
///
/// ```
/// use weir_core::{FailurePolicy, Key, Limiter, Rule, SystemClock};
/// use weir_resilience::{noting_failed_closed, FailoverConfig, FailoverStore};
/// use weir_testkit::faults::{Fault, FaultyStore};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let down = FaultyStore::new();
/// down.set(Fault::Down);
/// let limiter = Limiter::new(FailoverStore::new(down, FailoverConfig::default()), SystemClock::new());
/// let rule = Rule::per_second(10)?.on_failure(FailurePolicy::FailClosed);
/// let key = Key::new("api:alice")?;
/// let (decision, failed_closed) = noting_failed_closed(limiter.check(&key, &rule, 1)).await;
/// assert!(!decision?.allowed && failed_closed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub async fn noting_failed_closed<F: Future>(future: F) -> (F::Output, bool) {
    FAILED_CLOSED
        .scope(Cell::new(false), async move {
            let output = future.await;
            (output, FAILED_CLOSED.with(Cell::get))
        })
        .await
}

/// Marks the check running in this task (if anyone is noting) as denied by fail closed.
pub(crate) fn note_failed_closed() {
    let _ = FAILED_CLOSED.try_with(|noted| noted.set(true));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_mark_reaches_the_innermost_noting_caller_only_when_made() {
        let (_, none) = noting_failed_closed(async {}).await;
        assert!(!none);
        let (_, marked) = noting_failed_closed(async { note_failed_closed() }).await;
        assert!(marked);
        // Outside any noting caller, marking does nothing (and does not panic).
        note_failed_closed();
        let ((_, inner), outer) = noting_failed_closed(noting_failed_closed(async {
            note_failed_closed();
        }))
        .await;
        assert!(inner && !outer, "a nested caller passes the mark on itself");
    }
}
