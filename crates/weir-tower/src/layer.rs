//! [`RateLimitLayer`]: the configuration of the layer — its [`Limits`], the header style,
//! the in-flight limit — built once and shared (behind one `Arc`) by every service it makes
//! and every clone of those. A clone never gets a fresh budget: that is the difference from
//! `tower::limit::RateLimit`, whose clones each count on their own (so under axum, which
//! clones the service per connection, its limit silently does not hold).

use std::sync::Arc;

use tower::Layer;
use weir_core::{Clock, Limiter, Store};

use crate::headers::HeaderStyle;
use crate::in_flight::{InFlight, InFlightLimit};
use crate::limits::{Limits, Policies};
use crate::policy::{Policy, PolicyError};
use crate::service::RateLimit;
use crate::waiters::Waiters;

/// What every service of one layer shares.
pub(crate) struct Shared {
    pub(crate) limits: Arc<dyn Limits>,
    pub(crate) headers: HeaderStyle,
    pub(crate) in_flight: Option<InFlight>,
    pub(crate) waiters: Arc<Waiters>,
}

/// A tower layer that rate-limits requests before they reach the service it wraps.
///
/// ```
/// use std::time::Duration;
/// use axum::{routing::get, Router};
/// use weir_core::{Limiter, Rule};
/// use weir_tower::{KeyBy, Policy, RateLimitLayer};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let per_ip = Policy::new("per_ip", Rule::gcra(10, Duration::from_secs(1), 20)?)?
///     .key(KeyBy::peer_ip());
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(RateLimitLayer::new(Limiter::default(), vec![per_ip])?.max_in_flight(
///         weir_tower::InFlightLimit {
///             max_in_flight: 8,
///             max_queued: 64,
///             max_wait: Duration::from_secs(2),
///         },
///     ));
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    shared: Arc<Shared>,
}

impl RateLimitLayer {
    /// A layer deciding `policies` with `limiter` (any store, any clock). Fails when two
    /// policies share a name.
    pub fn new<S: Store, C: Clock>(
        limiter: Limiter<S, C>,
        policies: Vec<Policy>,
    ) -> Result<Self, PolicyError> {
        Policies::new(limiter, policies).map(Self::with_limits)
    }

    /// A layer over any [`Limits`] (e.g. rules from YAML files through `weir proxy`'s engine).
    pub fn with_limits(limits: impl Limits) -> Self {
        Self {
            shared: Arc::new(Shared {
                limits: Arc::new(limits),
                headers: HeaderStyle::default(),
                in_flight: None,
                waiters: Arc::default(),
            }),
        }
    }

    fn edit(self, change: impl FnOnce(&mut Shared)) -> Self {
        // Built before any service exists, so the Arc is unique; if not, copy the parts.
        let mut shared = Arc::try_unwrap(self.shared).unwrap_or_else(|arc| Shared {
            limits: Arc::clone(&arc.limits),
            headers: arc.headers,
            in_flight: arc.in_flight.as_ref().map(|f| InFlight::new(f.settings())),
            waiters: Arc::default(),
        });
        change(&mut shared);
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Which rate-limit headers to send (default: the IETF ones only).
    pub fn headers(self, style: HeaderStyle) -> Self {
        self.edit(|s| s.headers = style)
    }

    /// Bounds the requests inside the inner service at once (degraded requests, which go
    /// to the fallback, do not count).
    pub fn max_in_flight(self, limit: InFlightLimit) -> Self {
        self.edit(|s| s.in_flight = Some(InFlight::new(limit)))
    }

    /// Requests inside the inner service now (0 without an in-flight limit).
    pub fn in_flight(&self) -> usize {
        self.shared
            .in_flight
            .as_ref()
            .map_or(0, InFlight::in_flight)
    }
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("headers", &self.shared.headers)
            .field("in_flight", &self.shared.in_flight)
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.shared))
    }
}
