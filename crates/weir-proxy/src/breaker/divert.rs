//! Where a call goes once the upstream is chosen, by the breakers: the chosen upstream if
//! its breaker lets the call through; else the fallback upstream if there is one and its
//! own breaker lets it through (the call is degraded); else `503` with `Retry-After` (the
//! shorter of the two waits, in whole seconds, at least one) and a body saying the backend
//! is unavailable. Run by [`Forward`](crate::Forward) before anything is sent.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderValue, RETRY_AFTER};
use http::{Response, StatusCode};

use super::upstreams::{Breakers, Permit};
use crate::answer::ProxyBody;
use crate::pool::Pool;
use crate::reply::error;
use crate::upstream::Upstream;

/// A call no upstream may take now: [`Refusal::answer`] is its `503`.
#[derive(Debug)]
pub(crate) struct Refusal<'a> {
    upstream: &'a Upstream,
    wait: Duration,
}

impl Refusal<'_> {
    /// `503`: the upstream's circuit is open; try again after the wait.
    pub(crate) fn answer(&self) -> Response<ProxyBody> {
        unavailable(self.upstream, self.wait)
    }
}

/// The pool a call goes to and its permit (none with the breakers off), or why none.
pub(crate) fn divert<'a>(
    breakers: &'a Breakers,
    chosen: &'a Arc<Pool>,
    fallback: Option<&'a Arc<Pool>>,
) -> Result<(&'a Arc<Pool>, Option<Permit>), Refusal<'a>> {
    let Some(breaker) = breakers.of(chosen.upstream()) else {
        return Ok((chosen, None));
    };
    let mut wait = match breaker.admit() {
        Ok(permit) => return Ok((chosen, Some(permit))),
        Err(wait) => wait,
    };
    if let Some(fallback) = fallback.filter(|f| !Arc::ptr_eq(f, chosen)) {
        match breakers.of(fallback.upstream()).map(|b| b.admit()) {
            Some(Ok(permit)) => {
                tracing::debug!(upstream = %chosen.upstream(), fallback = %fallback.upstream(),
                    "circuit open: the call goes to the fallback");
                return Ok((fallback, Some(permit)));
            }
            None => return Ok((fallback, None)),
            Some(Err(fallback_wait)) => wait = wait.min(fallback_wait),
        }
    }
    Err(Refusal {
        upstream: breaker.upstream(),
        wait,
    })
}

/// `503`: the upstream's circuit is open; try again after `wait`.
fn unavailable(upstream: &Upstream, wait: Duration) -> Response<ProxyBody> {
    let seconds = retry_after_seconds(wait);
    let mut response = error(
        StatusCode::SERVICE_UNAVAILABLE,
        &format!(
            "the backend is unavailable: upstream {upstream} is failing or slow and its circuit breaker is open; retry in {seconds} s"
        ),
    );
    response
        .headers_mut()
        .insert(RETRY_AFTER, HeaderValue::from(seconds));
    response
}

/// Whole seconds, rounded up, at least one.
fn retry_after_seconds(wait: Duration) -> u64 {
    let whole = wait.as_secs();
    let seconds = if wait.subsec_nanos() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    };
    seconds.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_rounds_up_to_whole_seconds_never_zero() {
        assert_eq!(retry_after_seconds(Duration::ZERO), 1);
        assert_eq!(retry_after_seconds(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_seconds(Duration::from_secs(30)), 30);
        assert_eq!(retry_after_seconds(Duration::from_millis(29_001)), 30);
    }
}
