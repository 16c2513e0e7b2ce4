//! `weir proxy`'s upstream circuit breakers as the metrics and the dashboard see them: the
//! state names ([`BreakerState`]), what one breaker shows ([`UpstreamBreakerView`]), and
//! the role the proxy's breakers play for [`Metrics`](super::Metrics)
//! ([`UpstreamBreakers`]). The breakers themselves are the proxy's
//! (`weir-proxy/src/breaker/`); this only reads them at scrape time (the dashboard reads
//! them as the proxy's `upstreams` panel, `panels.rs`), and takes no part in a decision. Labels are upstreams from the proxy's flags:
//! bounded, never a client's value.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Serialize;

/// Where an upstream's circuit breaker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BreakerState {
    /// Calls go through and are counted.
    Closed,
    /// Calls are refused (or degraded to the fallback) until the wait is over.
    Open,
    /// A few probe calls go through; the rest are refused.
    HalfOpen,
}

impl BreakerState {
    /// `closed`, `open` or `half_open`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }

    /// The gauge's value: 0 closed, 1 open, 2 half-open.
    pub fn gauge(self) -> i64 {
        match self {
            Self::Closed => 0,
            Self::Open => 1,
            Self::HalfOpen => 2,
        }
    }
}

/// One upstream's breaker, as read at one instant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UpstreamBreakerView {
    /// The upstream (`http://host:port`).
    pub upstream: String,
    /// Its state now.
    pub state: BreakerState,
    /// While open: milliseconds until probes go through.
    pub open_remaining_ms: Option<u64>,
    /// Closed: calls counted in the window now.
    pub window_calls: u32,
    /// Closed: of them, failed.
    pub window_failures: u32,
    /// Closed: of them, slow.
    pub window_slow: u32,
    /// Times it opened.
    pub opened: u64,
    /// Times it became half-open.
    pub half_opened: u64,
    /// Times it closed again.
    pub closed: u64,
    /// Calls it refused (the fallback took them, or they were answered 503).
    pub rejected: u64,
}

/// What `weir proxy`'s breakers show the metrics and the dashboard.
pub trait UpstreamBreakers: Send + Sync + std::fmt::Debug {
    /// Every upstream's breaker, now.
    fn views(&self) -> Vec<UpstreamBreakerView>;
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct UpstreamLabels {
    upstream: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TransitionLabels {
    upstream: String,
    to: &'static str,
}

/// The breaker families, registered with every other metric; filled at scrape time.
#[derive(Debug, Clone, Default)]
pub(crate) struct BreakerFamilies {
    state: Family<UpstreamLabels, Gauge>,
    transitions: Family<TransitionLabels, Counter>,
    rejected: Family<UpstreamLabels, Counter>,
}

impl BreakerFamilies {
    pub(crate) fn register(registry: &mut Registry) -> Self {
        let families = Self::default();
        registry.register(
            "weir_upstream_breaker_state",
            "weir proxy: each upstream's circuit breaker, 0 closed, 1 open, 2 half-open",
            families.state.clone(),
        );
        registry.register(
            "weir_upstream_breaker_transitions",
            "weir proxy: times an upstream's circuit breaker changed state, by the state it entered",
            families.transitions.clone(),
        );
        registry.register(
            "weir_upstream_breaker_rejected",
            "weir proxy: calls an open (or half-open) circuit breaker kept from its upstream",
            families.rejected.clone(),
        );
        families
    }

    /// Copies `views` in (counters by what is new since `seen`, which is then updated).
    pub(crate) fn collect(
        &self,
        views: &[UpstreamBreakerView],
        seen: &mut Vec<UpstreamBreakerView>,
    ) {
        for view in views {
            let upstream = || UpstreamLabels {
                upstream: view.upstream.clone(),
            };
            self.state
                .get_or_create(&upstream())
                .set(view.state.gauge());
            let before = seen.iter().find(|s| s.upstream == view.upstream);
            let since = |now: u64, then: fn(&UpstreamBreakerView) -> u64| {
                now.saturating_sub(before.map_or(0, then))
            };
            for (to, count) in [
                (BreakerState::Open, since(view.opened, |s| s.opened)),
                (
                    BreakerState::HalfOpen,
                    since(view.half_opened, |s| s.half_opened),
                ),
                (BreakerState::Closed, since(view.closed, |s| s.closed)),
            ] {
                self.transitions
                    .get_or_create(&TransitionLabels {
                        upstream: view.upstream.clone(),
                        to: to.as_str(),
                    })
                    .inc_by(count);
            }
            self.rejected
                .get_or_create(&upstream())
                .inc_by(since(view.rejected, |s| s.rejected));
        }
        seen.clear();
        seen.extend_from_slice(views);
    }
}
