//! [`Refused`]: a request the layer answers itself (`429` when a limit rejects it, `503`
//! when the in-flight limit stays full or the limiter cannot decide), as a custom refusal
//! handler sees it ([`RateLimitLayer::on_refusal`](crate::RateLimitLayer::on_refusal)).
//! The last step of a refused request's path: the handler writes the response, and the
//! layer adds `Retry-After` and the rate-limit headers the handler did not set itself.

use std::sync::Arc;
use std::time::Duration;

use http::header::{HeaderValue, RETRY_AFTER};
use http::request::Parts;
use http::{HeaderMap, Response, StatusCode};

use crate::limits::Evaluation;
use weir_names::{ceil_secs, HeaderStyle};

/// Why the layer answered a request itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalReason {
    /// A limit denied the request (after any queueing): `429`.
    Limited,
    /// The request's limit queues, and its key's queue is full: `429`.
    QueueFull,
    /// The in-flight limit stayed full for the longest wait: `503`.
    Busy,
    /// The limiter could not decide (a store failure, or a key that cannot be built) and
    /// the rules say not to let the request through: `503`.
    Unavailable,
}

impl RefusalReason {
    /// The HTTP status of the layer's own answer.
    pub fn status(self) -> StatusCode {
        match self {
            Self::Limited | Self::QueueFull => StatusCode::TOO_MANY_REQUESTS,
            Self::Busy | Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The gRPC status code of the layer's own answer to a gRPC request.
    pub(crate) fn grpc_status(self) -> u16 {
        match self {
            Self::Limited | Self::QueueFull => 8, // RESOURCE_EXHAUSTED
            Self::Busy | Self::Unavailable => 14, // UNAVAILABLE
        }
    }

    /// A short message for the client, in lower case (the layer's own answers carry it).
    pub fn message(self) -> &'static str {
        match self {
            Self::Limited => "rate limit exceeded",
            Self::QueueFull => "rate limit exceeded and too many requests already waiting",
            Self::Busy => "too many requests in flight; try again shortly",
            Self::Unavailable => "rate limiter unavailable",
        }
    }
}

/// A handler that writes the response to a refused request (see
/// [`RateLimitLayer::on_refusal`](crate::RateLimitLayer::on_refusal)).
pub type RefusalFn = Arc<dyn Fn(&Refused<'_>) -> Response<String> + Send + Sync>;

/// A request the layer refuses, and why: what a custom refusal handler is given.
#[derive(Debug, Clone, Copy)]
pub struct Refused<'a> {
    pub(crate) reason: RefusalReason,
    pub(crate) request: &'a Parts,
    pub(crate) evaluation: Option<&'a Evaluation>,
    pub(crate) style: HeaderStyle,
}

impl<'a> Refused<'a> {
    /// Why the request is refused.
    pub fn reason(&self) -> RefusalReason {
        self.reason
    }

    /// The status of the layer's own answer (`429` or `503`).
    pub fn status(&self) -> StatusCode {
        self.reason.status()
    }

    /// The request (method, URI, headers, extensions; not the body).
    pub fn request(&self) -> &'a Parts {
        self.request
    }

    /// The limits that applied and their decisions, when limits refused the request (none
    /// for `Busy` and `Unavailable`).
    pub fn evaluation(&self) -> Option<&'a Evaluation> {
        self.evaluation
    }

    /// The name of the limit that denied the request (the tightest denial), if a limit did.
    pub fn limit(&self) -> Option<&'a str> {
        self.evaluation
            .and_then(|e| weir_names::tightest(&e.applied))
            .filter(|a| !a.decision.allowed)
            .map(|a| &*a.name)
    }

    /// How long the client should wait: the longest denial's `retry_after`, or one second
    /// when no limit said (`Busy`, `Unavailable`).
    pub fn retry_after(&self) -> Duration {
        self.evaluation
            .map(Evaluation::retry_after)
            .filter(|d| !d.is_zero())
            .unwrap_or(Duration::from_secs(1))
    }

    /// [`retry_after`](Self::retry_after) in whole seconds, rounded up (29.001 s is 30: a
    /// client waiting that long is never early) and at least 1: the `Retry-After` value.
    pub fn retry_after_secs(&self) -> u64 {
        ceil_secs(self.retry_after()).max(1)
    }

    /// The headers the layer puts on its answer: `Retry-After` and the rate-limit headers
    /// of the layer's style. They are added to a custom handler's response too, except
    /// those it set itself.
    pub fn headers(&self) -> HeaderMap {
        let mut headers = match self.evaluation {
            Some(evaluation) => evaluation.headers(self.style),
            None => HeaderMap::new(),
        };
        headers.insert(RETRY_AFTER, HeaderValue::from(self.retry_after_secs()));
        headers
    }
}
