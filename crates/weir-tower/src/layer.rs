//! [`RateLimitLayer`]: the configuration of the layer — its [`Limits`], the header style,
//! the in-flight limit, the refusal handler — built once and shared (behind one `Arc`) by every service it makes
//! and every clone of those. A clone never gets a fresh budget: that is the difference from
//! `tower::limit::RateLimit`, whose clones each count on their own (so under axum, which
//! clones the service per connection, its limit silently does not hold).

use std::sync::Arc;

use http::Response;
use tower::Layer;
use weir_core::{Clock, Limiter, Rule, Store};

use crate::gate::Gate;
use crate::in_flight::{InFlightLimit, InFlightStats};
use crate::key_by::KeyBy;
use crate::limits::{Limits, Policies};
use crate::policy::{Policy, PolicyError};
use crate::refused::{RefusalFn, Refused};
use crate::service::RateLimit;
use crate::shared::{PriorityFn, Shared};
use weir_names::HeaderStyle;

/// A tower layer that rate-limits requests before they reach the service it wraps.
///
/// The shortest way in: each client IP, one rule ([`RateLimitLayer::per_ip`]).
///
/// ```no_run
/// use std::net::SocketAddr;
/// use axum::{routing::get, Router};
/// use weir_core::Rule;
/// use weir_tower::RateLimitLayer;
///
/// # #[cfg(feature = "axum")] // axum's body and ConnectInfo
/// # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let layer = RateLimitLayer::per_ip(Rule::per_second(10)?)?;
/// let app = Router::new().route("/", get(|| async { "hello" })).layer(layer);
/// # let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
/// axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await?;
/// # Ok(()) }
/// # #[cfg(not(feature = "axum"))] fn main() {}
/// ```
///
/// Several policies, and an in-flight limit:
///
/// ```
/// use std::time::Duration;
/// use axum::{routing::get, Router};
/// use weir_core::{Limiter, Rule};
/// use weir_tower::{KeyBy, Policy, RateLimitLayer};
///
/// # #[cfg(feature = "axum")]
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let per_ip = Policy::new("per_ip", Rule::gcra(10, Duration::from_secs(1), 20)?)?
///     .key(KeyBy::peer_ip());
/// let app: Router = Router::new()
///     .route("/", get(|| async { "hello" }))
///     .layer(RateLimitLayer::new(Limiter::default(), vec![per_ip])?.max_in_flight(
///         weir_tower::InFlightLimit::fixed(8, 64, Duration::from_secs(2)),
///     ));
/// # Ok(()) }
/// # #[cfg(not(feature = "axum"))] fn main() {}
/// ```
#[derive(Clone)]
pub struct RateLimitLayer {
    shared: Arc<Shared>,
}

impl RateLimitLayer {
    /// A layer limiting each client IP (the TCP peer's address; IPv6 by /64) by `rule`, on
    /// the embedded memory store: the quick start. The limit is named `per_ip` in the
    /// headers. Serve the app with `into_make_service_with_connect_info::<SocketAddr>()`:
    /// without the peer's address a request is refused (`503`), never let through
    /// unlimited. Fails for a concurrency rule (see [`max_in_flight`](Self::max_in_flight)).
    pub fn per_ip(rule: Rule) -> Result<Self, PolicyError> {
        Self::per_ip_with(Limiter::default(), rule)
    }

    /// [`per_ip`](Self::per_ip) on `limiter` (any store, e.g. Redis shared by several
    /// instances; keep a clone to reset or inspect keys from a handler).
    pub fn per_ip_with<S: Store, C: Clock>(
        limiter: Limiter<S, C>,
        rule: Rule,
    ) -> Result<Self, PolicyError> {
        Self::new(
            limiter,
            vec![Policy::new("per_ip", rule)?.key(KeyBy::peer_ip())],
        )
    }

    /// A layer deciding `policies` with `limiter` (any store, any clock). Each policy has a
    /// key chosen with [`Policy::key`]. Fails when two policies share a name.
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
                priority: None,
                waiters: Arc::default(),
                on_refusal: None,
            }),
        }
    }

    fn edit(self, change: impl FnOnce(&mut Shared)) -> Self {
        // Built before any service exists, so the Arc is unique; if not, copy the parts.
        let mut shared = Arc::try_unwrap(self.shared).unwrap_or_else(|arc| Shared {
            limits: Arc::clone(&arc.limits),
            headers: arc.headers,
            in_flight: arc
                .in_flight
                .as_ref()
                .map(|f| Arc::new(Gate::new(f.settings()))),
            priority: arc.priority.clone(),
            waiters: Arc::default(),
            on_refusal: arc.on_refusal.clone(),
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
    /// to the fallback, do not count): a fixed bound ([`InFlightLimit::fixed`]) or one
    /// found by measuring the service's latency ([`InFlightLimit::adaptive`]). Over it, a
    /// request waits in a bounded line (higher [`priority`](Self::priority) first); shed,
    /// it is answered `503` with `Retry-After`, or sent to the fallback when its limits
    /// say [`OnLimit::Degrade`](crate::OnLimit::Degrade).
    pub fn max_in_flight(self, limit: InFlightLimit) -> Self {
        self.edit(|s| s.in_flight = Some(Arc::new(Gate::new(limit))))
    }

    /// Each request's priority at the in-flight limit, from its head (higher goes first;
    /// without this every request is 0). When the limit is reached, waiting requests are
    /// let in highest first, and a full line sheds its lowest: crawlers before readers.
    ///
    /// ```
    /// use weir_core::Rule;
    /// use weir_tower::RateLimitLayer;
    ///
    /// let layer = RateLimitLayer::per_ip(Rule::per_second(10)?)?.priority(|parts| {
    ///     let ua = parts.headers.get("user-agent").and_then(|v| v.to_str().ok());
    ///     if ua.is_some_and(|ua| ua.contains("bot")) { 0 } else { 1 }
    /// });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn priority(
        self,
        priority: impl Fn(&http::request::Parts) -> u8 + Send + Sync + 'static,
    ) -> Self {
        let priority: PriorityFn = Arc::new(priority);
        self.edit(|s| s.priority = Some(priority))
    }

    /// Answers refused requests with `handler`'s response instead of the layer's own (like
    /// tower_governor's error handler): a page of your own, another JSON shape. The handler
    /// sees why and by which limit ([`Refused`]); `Retry-After` and the rate-limit headers
    /// are added to its response unless it set them itself. It answers every refusal,
    /// `503`s and gRPC requests included ([`Refused::default_response`] is the layer's own
    /// answer, to fall back to).
    ///
    /// ```
    /// use http::{Response, StatusCode};
    /// use weir_core::Rule;
    /// use weir_tower::{RateLimitLayer, RefusalReason};
    ///
    /// let layer = RateLimitLayer::per_ip(Rule::per_second(10)?)?.on_refusal(|refused| {
    ///     if refused.reason() != RefusalReason::Limited {
    ///         return refused.default_response();
    ///     }
    ///     let mut page = Response::new(format!(
    ///         "<h1>Slow down</h1><p>Try again in {} s.</p>",
    ///         refused.retry_after_secs()
    ///     ));
    ///     *page.status_mut() = StatusCode::TOO_MANY_REQUESTS;
    ///     page.headers_mut().insert("content-type", "text/html; charset=utf-8".parse().unwrap());
    ///     page
    /// });
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn on_refusal(
        self,
        handler: impl Fn(&Refused<'_>) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        let handler: RefusalFn = Arc::new(handler);
        self.edit(|s| s.on_refusal = Some(handler))
    }

    /// Requests inside the inner service now (0 without an in-flight limit).
    pub fn in_flight(&self) -> usize {
        self.in_flight_stats().map_or(0, |s| s.in_flight)
    }

    /// The in-flight limit's figures now: its limit, requests inside and waiting, the
    /// measured latencies (adaptive), requests shed and admitted by priority. `None`
    /// without an in-flight limit.
    pub fn in_flight_stats(&self) -> Option<InFlightStats> {
        self.shared.in_flight.as_ref().map(|gate| gate.stats())
    }
}

impl std::fmt::Debug for RateLimitLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimitLayer")
            .field("headers", &self.shared.headers)
            .field("in_flight", &self.shared.in_flight)
            .field("on_refusal", &self.shared.on_refusal.is_some())
            .finish_non_exhaustive()
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::new(inner, Arc::clone(&self.shared))
    }
}
