//! A request's time bound (`request_timeout`) on the hot paths, the HTTP listener's direct
//! routes (`http/direct.rs`) and the gRPC listener (`grpc_listener.rs`): [`in_time`] arms
//! the timer only when the request does not complete on its first poll. A request whose
//! body has arrived, decided on the memory store, completes at once, and inserting and
//! removing a timer entry on every request was the dearest part of `tokio::time::timeout`
//! there (docs/benchmarks-history.md, "Hot paths").

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::task::Poll;
use std::time::Duration;

/// `future`'s output if it completes within `limit`, else `None` (the future dropped by
/// the caller). When the first poll does not complete it, the timer is armed for what is
/// left of `limit` by then (`elapsed()` is the time since the request began).
///
/// The future comes pinned where the caller made it (`pin!(…)`), not by value: a request's
/// future holds every state of its decision and is some kilobytes, and pinning it here
/// copied it whole on every request (3.5 % of the HTTP listener's cycles, issue 31).
pub async fn in_time<F: Future>(
    limit: Duration,
    elapsed: impl FnOnce() -> Duration,
    mut future: Pin<&mut F>,
) -> Option<F::Output> {
    if let Poll::Ready(output) = poll_fn(|cx| Poll::Ready(future.as_mut().poll(cx))).await {
        return Some(output);
    }
    let left = limit.saturating_sub(elapsed());
    tokio::time::timeout(left, future).await.ok()
}

#[cfg(test)]
mod tests {
    use std::future::pending;
    use std::pin::pin;

    use super::*;

    #[tokio::test]
    async fn a_ready_future_needs_no_timer_and_a_late_one_is_cut_at_what_is_left() {
        // Ready at once: no time at all is needed.
        assert_eq!(
            in_time(Duration::ZERO, || Duration::ZERO, pin!(async { 7 })).await,
            Some(7)
        );
        // Never ready: cut once what is left of the limit has passed (a limit already
        // spent leaves nothing: cut at the next tick).
        let spent = pin!(pending::<()>());
        let spent = in_time(Duration::from_secs(5), || Duration::from_secs(9), spent);
        assert_eq!(spent.await, None);
        let never = pin!(pending::<()>());
        let never = in_time(Duration::from_millis(20), || Duration::ZERO, never);
        assert_eq!(never.await, None);
        // Ready later, within the limit.
        let late = async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            1
        };
        assert_eq!(
            in_time(Duration::from_secs(30), || Duration::ZERO, pin!(late)).await,
            Some(1)
        );
    }
}
