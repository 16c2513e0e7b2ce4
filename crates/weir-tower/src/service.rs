//! [`RateLimit`]: the service the layer wraps around yours, and the path of one request
//! through it:
//!
//! 1. the [`Limits`](crate::Limits) evaluate the request (every applying limit checked
//!    together, all-or-nothing);
//! 2. allowed: wait the leaky-bucket queue's pacing delay if any, take an in-flight slot
//!    (a bounded wait, higher priorities first; shed: `503`, or the fallback when the
//!    limits say degrade), call the inner service (its answer's time is the adaptive
//!    limit's sample), add the rate-limit headers to its response
//!    (to a `429` of its own, only those it did not set itself);
//! 3. denied: per the first denying limit's [`OnLimit`] — reject (`429`), queue (wait for
//!    `retry_after` on the limiter's clock and evaluate again, up to a max wait, with a
//!    bounded number of waiters per key), or degrade (mark [`Degraded`] and send on, to a
//!    [`Fallback`](crate::Fallback) if there is one);
//! 4. the limiter failed: the rules' failure policy — fail open sends the request on,
//!    anything else answers `503`.

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response};
use tower::Service;
use weir_core::{FailurePolicy, Wait, WaitStep};

use crate::limits::{BoxFuture, Evaluation};
use crate::policy::OnLimit;
use crate::refused::RefusalReason;
use crate::response::{add_rate_limit_headers, refuse, RefusalBody};
use crate::shared::Shared;
use crate::waiters::Place;

/// The mark on a request that a limit sent to the fallback service: which limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Degraded {
    /// The limit that denied it.
    pub limit: Arc<str>,
}

/// A service rate-limited by a [`RateLimitLayer`](crate::RateLimitLayer). `Clone`: every
/// clone shares the layer's budget.
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> RateLimit<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        Self { inner, shared }
    }
}

impl<S> std::fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimit").finish_non_exhaustive()
    }
}

/// The future of [`RateLimit`]'s responses.
pub type ResponseFuture<R, E> = BoxFuture<'static, Result<R, E>>;

/// The name a request shed by the in-flight limit is degraded under.
const IN_FLIGHT: &str = "in_flight";

/// What to do with a request once the limits have spoken.
enum Next {
    /// Send it on, at the given time if the leaky-bucket queue paces it.
    Forward(Evaluation, Option<u64>),
    Degrade(Evaluation, Arc<str>),
    Refuse(RefusalReason, Option<Evaluation>),
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: RefusalBody + Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = S::Error;
    type Future = ResponseFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // Readiness is awaited on a clone inside the call, after the limits allowed the
        // request (a queued request must not hold a ready inner service meanwhile).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        let shared = Arc::clone(&self.shared);
        // Readiness of the inner service is awaited by `oneshot` on this clone.
        let inner = self.inner.clone();
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            let next = admit(&shared, &parts).await;
            let (evaluation, go_at, degraded) = match next {
                Next::Forward(e, go_at) => (e, go_at, None),
                Next::Degrade(e, limit) => (e, None, Some(limit)),
                Next::Refuse(reason, e) => {
                    return Ok(refuse(
                        reason,
                        &parts,
                        e.as_ref(),
                        shared.headers,
                        shared.on_refusal.as_ref(),
                    ));
                }
            };
            let clock = shared.limits.clock();
            if let Some(go_ns) = go_at {
                clock.sleep_until(go_ns).await;
            }
            let mut degraded = degraded;
            let mut slot = None;
            if let (None, Some(gate)) = (&degraded, &shared.in_flight) {
                let priority = shared.priority.as_ref().map_or(0, |p| p(&parts));
                match gate.acquire(priority, clock).await {
                    Some(taken) => slot = Some(taken),
                    // Shed: to the fallback when the limits say degrade, else 503.
                    None if evaluation.on_limit == OnLimit::Degrade => {
                        degraded = Some(Arc::from(IN_FLIGHT));
                    }
                    None => {
                        return Ok(refuse(
                            RefusalReason::Busy,
                            &parts,
                            None,
                            shared.headers,
                            shared.on_refusal.as_ref(),
                        ));
                    }
                }
            }
            if let Some(limit) = degraded {
                parts.extensions.insert(Degraded { limit });
            }
            let answer = tower::ServiceExt::oneshot(inner, Request::from_parts(parts, body)).await;
            if let Some(slot) = slot {
                // A gateway's failure (or the service's) says nothing about queueing.
                let dropped = answer
                    .as_ref()
                    .map_or(true, |r| matches!(r.status().as_u16(), 502..=504));
                slot.finish(clock.now_ns(), dropped);
            }
            let mut response = answer?;
            add_rate_limit_headers(&mut response, &evaluation, shared.headers);
            Ok(response)
        })
    }
}

/// Evaluates the request, queueing it while its limit says so. When to go, retry or give
/// up is the limiter's own wait logic ([`Wait::after`], as `Limiter::wait` steps): a queued
/// request is evaluated again exactly at `retry_after`, and gives up when that would come
/// past its `max_wait`.
async fn admit(shared: &Arc<Shared>, parts: &http::request::Parts) -> Next {
    let clock = shared.limits.clock();
    let mut wait: Option<Wait> = None;
    let mut _place: Option<Place> = None;
    loop {
        // Decided in place when the limits can (the memory store), else awaited.
        let evaluated = match shared.limits.evaluate_now(parts) {
            Some(evaluated) => evaluated,
            None => shared.limits.evaluate(parts).await,
        };
        let evaluation = match evaluated {
            Ok(e) => e,
            Err(error) => {
                tracing::warn!(reason = %error.reason, "rate limiter failed; applying the failure policy");
                return if error.on_failure == FailurePolicy::FailOpen {
                    Next::Forward(Evaluation::unlimited(), None)
                } else {
                    Next::Refuse(RefusalReason::Unavailable, None)
                };
            }
        };
        let now_ns = clock.now_ns();
        // Only a queueing limit waits; the wait starts at the first evaluation.
        let max_wait = match evaluation.on_limit {
            OnLimit::Queue { max_wait, .. } if !evaluation.allowed => max_wait,
            _ => Duration::ZERO,
        };
        let step = wait
            .get_or_insert_with(|| Wait::new(now_ns, max_wait))
            .after(&evaluation, now_ns);
        let retry_ns = match step {
            WaitStep::Go => return Next::Forward(evaluation, None),
            WaitStep::GoAt(go_ns) => return Next::Forward(evaluation, Some(go_ns)),
            WaitStep::RetryAt(retry_ns) => retry_ns,
            WaitStep::GiveUp => return refused(evaluation),
        };
        let OnLimit::Queue { max_queued, .. } = evaluation.on_limit else {
            return refused(evaluation);
        };
        if _place.is_none() {
            let Some(key) = &evaluation.queue_key else {
                return Next::Refuse(RefusalReason::Limited, Some(evaluation));
            };
            match shared.waiters.join(key, max_queued) {
                Some(place) => _place = Some(place),
                None => return Next::Refuse(RefusalReason::QueueFull, Some(evaluation)),
            }
        }
        clock.sleep_until(retry_ns).await;
    }
}

/// A denial that does not wait: degraded to the fallback, or refused.
fn refused(evaluation: Evaluation) -> Next {
    if evaluation.on_limit == OnLimit::Degrade {
        let limit = weir_names::tightest(&evaluation.applied)
            .map_or_else(|| Arc::from("unknown"), |a| Arc::clone(&a.name));
        return Next::Degrade(evaluation, limit);
    }
    Next::Refuse(RefusalReason::Limited, Some(evaluation))
}

/// Routes requests marked [`Degraded`] to `fallback`, the rest to `primary`. Put it inside
/// the layer: `RateLimitLayer` → `Fallback { primary, fallback }`.
///
/// ```
/// use axum::{routing::get, Router};
/// use weir_tower::Fallback;
///
/// let full: Router = Router::new().route("/", get(|| async { "the full page" }));
/// let cheap: Router = Router::new().route("/", get(|| async { "a cached page" }));
/// let service = Fallback::new(full, cheap); // then .layer(RateLimitLayer …) around it
/// ```
#[derive(Debug, Clone)]
pub struct Fallback<P, F> {
    primary: P,
    fallback: F,
}

impl<P, F> Fallback<P, F> {
    /// `primary` for normal requests, `fallback` for degraded ones.
    pub fn new(primary: P, fallback: F) -> Self {
        Self { primary, fallback }
    }
}

impl<P, F, ReqBody, ResBody> Service<Request<ReqBody>> for Fallback<P, F>
where
    P: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    P::Future: Send + 'static,
    P::Error: Send + 'static,
    F: Service<Request<ReqBody>, Response = Response<ResBody>, Error = P::Error>
        + Clone
        + Send
        + 'static,
    F::Future: Send + 'static,
    ReqBody: Send + 'static,
{
    type Response = Response<ResBody>;
    type Error = P::Error;
    type Future = ResponseFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        if request.extensions().get::<Degraded>().is_some() {
            Box::pin(tower::ServiceExt::oneshot(self.fallback.clone(), request))
        } else {
            Box::pin(tower::ServiceExt::oneshot(self.primary.clone(), request))
        }
    }
}
