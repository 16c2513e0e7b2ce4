//! The proxy's circuit breakers, one per upstream (the default, the fallback, each class's
//! own): [`Breakers`] finds an upstream's, [`UpstreamBreaker`] holds its pure state
//! machine (`machine.rs`) behind a short lock and reads the engine's clock, and a
//! [`Permit`] carries one admitted call to its end. [`Forward`](crate::Forward) asks for a
//! permit after it has chosen the upstream and before it sends anything; the metrics read
//! the breakers through `weir_engine::UpstreamBreakers`, the dashboard as the `upstreams`
//! panel (`Metrics::add_panel`, in `serve.rs`).
//!
//! A permit dropped without an answer (the client's body failed, the client went away, an
//! upgrade whose end says nothing of the upstream) is abandoned: it counts neither way, and
//! a half-open probe's slot is free again, so no client can hold the circuit half-open.

use std::sync::{Arc, Mutex, PoisonError};

use weir_core::Clock;
use weir_engine::{BreakerState, SharedClock, UpstreamBreakerView, UpstreamBreakers};

use super::machine::{Admission, Machine, Ticket};
use super::settings::BreakerSettings;
use crate::upstream::Upstream;

/// One upstream's circuit breaker.
#[derive(Debug)]
pub(crate) struct UpstreamBreaker {
    upstream: Upstream,
    machine: Mutex<Machine>,
    clock: SharedClock,
}

/// One call let through to an upstream. Report its end with [`Permit::finish`]; dropped
/// unreported, it is abandoned.
#[derive(Debug)]
pub(crate) struct Permit {
    breaker: Arc<UpstreamBreaker>,
    ticket: Ticket,
    started_ns: u64,
    reported: bool,
}

impl UpstreamBreaker {
    fn new(upstream: Upstream, settings: BreakerSettings, clock: SharedClock) -> Self {
        Self {
            upstream,
            machine: Mutex::new(Machine::new(settings)),
            clock,
        }
    }

    fn machine(&self) -> std::sync::MutexGuard<'_, Machine> {
        // The machine's state is whole after every call: a panic elsewhere leaves it usable.
        self.machine.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A permit for one call, or how long until one may go (the circuit is open).
    pub(crate) fn admit(self: &Arc<Self>) -> Result<Permit, std::time::Duration> {
        let now_ns = self.clock.now_ns();
        match self.machine().admit(now_ns) {
            Admission::Admitted(ticket) => Ok(Permit {
                breaker: Arc::clone(self),
                ticket,
                started_ns: now_ns,
                reported: false,
            }),
            Admission::Refused { retry_after_ns } => {
                Err(std::time::Duration::from_nanos(retry_after_ns))
            }
        }
    }

    /// The upstream it guards.
    pub(crate) fn upstream(&self) -> &Upstream {
        &self.upstream
    }

    fn view(&self) -> UpstreamBreakerView {
        let s = self.machine().snapshot(self.clock.now_ns());
        UpstreamBreakerView {
            upstream: self.upstream.to_string(),
            state: s.state,
            open_remaining_ms: s.open_remaining_ns.map(|ns| ns.div_ceil(1_000_000)),
            window_calls: s.window.calls,
            window_failures: s.window.failures,
            window_slow: s.window.slow,
            opened: s.counts.opened,
            half_opened: s.counts.half_opened,
            closed: s.counts.closed,
            rejected: s.counts.rejected,
        }
    }
}

impl Permit {
    /// The call ended with an answer from the upstream (or none: `failed`). Its time runs
    /// from the permit to now.
    pub(crate) fn finish(mut self, failed: bool) {
        self.reported = true;
        let breaker = &self.breaker;
        let now_ns = breaker.clock.now_ns();
        let took_ns = now_ns.saturating_sub(self.started_ns);
        let changed = breaker
            .machine()
            .finish(self.ticket, now_ns, failed, took_ns);
        match changed {
            Some(BreakerState::Open) => tracing::warn!(
                upstream = %breaker.upstream,
                "circuit breaker opened: the upstream fails or is slow; its calls are degraded or refused"
            ),
            Some(state) => tracing::info!(
                upstream = %breaker.upstream,
                state = state.as_str(),
                "circuit breaker changed state"
            ),
            None => {}
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.reported {
            self.breaker.machine().abandon(self.ticket);
        }
    }
}

/// Every upstream's breaker (none when the breakers are off).
#[derive(Debug, Default)]
pub(crate) struct Breakers {
    all: Vec<Arc<UpstreamBreaker>>,
}

impl Breakers {
    /// One breaker per distinct upstream of `upstreams`, on `clock`.
    pub(crate) fn new<'a>(
        upstreams: impl IntoIterator<Item = &'a Upstream>,
        settings: BreakerSettings,
        clock: &SharedClock,
    ) -> Self {
        let mut all: Vec<Arc<UpstreamBreaker>> = Vec::new();
        for upstream in upstreams {
            if !all.iter().any(|b| b.upstream == *upstream) {
                all.push(Arc::new(UpstreamBreaker::new(
                    upstream.clone(),
                    settings,
                    clock.clone(),
                )));
            }
        }
        Self { all }
    }

    /// The breaker of `upstream`, if the breakers are on.
    pub(crate) fn of(&self, upstream: &Upstream) -> Option<&Arc<UpstreamBreaker>> {
        self.all.iter().find(|b| b.upstream == *upstream)
    }
}

impl UpstreamBreakers for Breakers {
    fn views(&self) -> Vec<UpstreamBreakerView> {
        self.all.iter().map(|b| b.view()).collect()
    }
}
