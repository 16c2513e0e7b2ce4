//! The circuit breaker of one upstream, as a pure state machine (resilience4j's
//! `CircuitBreakerStateMachine`, Sentinel's `AbstractCircuitBreaker`): closed → open on an
//! error ratio or a slow-call ratio over the sliding window (`window.rs`), once it holds
//! the minimum number of calls; open for a wait; then half-open, letting a few probe calls
//! through: all fine closes it, one failed or slow opens it again. Pure: every function
//! takes `now` (the engine's clock, a `ManualClock` in tests); the lock, the clock and the
//! metrics are `upstreams.rs`'s.
//!
//! Every change of state starts a new epoch. A call carries the epoch it was admitted in
//! ([`Ticket`]); an answer from an earlier epoch (a call sent while closed that comes back
//! after the circuit opened, a probe of an earlier half-open period) changes nothing.

use weir_engine::BreakerState;

use super::settings::BreakerSettings;
use super::window::{Totals, Window};

/// What a call refused while half-open (every probe slot taken) is told to wait: the
/// probes answer within the upstream timeout, and a second is the least `Retry-After`
/// says.
const HALF_OPEN_RETRY_NS: u64 = 1_000_000_000;

/// Where the machine is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed,
    Open { until_ns: u64 },
    HalfOpen { admitted: u32, succeeded: u32 },
}

/// A call let through: the epoch it was admitted in, and whether it is a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    epoch: u64,
    probe: bool,
}

/// Whether a call may go to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// Go; report how it went with [`Machine::finish`] (or [`Machine::abandon`]).
    Admitted(Ticket),
    /// The circuit is open (or every probe slot is taken): try again after this long.
    Refused { retry_after_ns: u64 },
}

/// How often the machine changed state and refused calls, since it was built.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    pub(crate) opened: u64,
    pub(crate) half_opened: u64,
    pub(crate) closed: u64,
    pub(crate) rejected: u64,
}

/// What the machine shows at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Snapshot {
    pub(crate) state: BreakerState,
    /// Open: how long until probes go through.
    pub(crate) open_remaining_ns: Option<u64>,
    /// The closed window's calls (empty while open or half-open).
    pub(crate) window: Totals,
    pub(crate) counts: Counts,
}

/// One upstream's circuit breaker.
#[derive(Debug, Clone)]
pub(crate) struct Machine {
    settings: BreakerSettings,
    slow_call_ns: u64,
    open_for_ns: u64,
    state: State,
    epoch: u64,
    window: Window,
    counts: Counts,
}

/// A duration in nanoseconds, saturating.
fn nanos(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Machine {
    /// A closed breaker with `settings` (already checked: `BreakerSettings::check`).
    pub(crate) fn new(settings: BreakerSettings) -> Self {
        Self {
            settings,
            slow_call_ns: nanos(settings.slow_call),
            open_for_ns: nanos(settings.open_for),
            state: State::Closed,
            epoch: 0,
            window: Window::new(nanos(settings.window)),
            counts: Counts::default(),
        }
    }

    /// Whether a call may go now.
    pub(crate) fn admit(&mut self, now_ns: u64) -> Admission {
        self.advance(now_ns);
        let probes = self.settings.probes;
        match &mut self.state {
            State::Closed => Admission::Admitted(Ticket {
                epoch: self.epoch,
                probe: false,
            }),
            State::HalfOpen { admitted, .. } if *admitted < probes => {
                *admitted += 1;
                Admission::Admitted(Ticket {
                    epoch: self.epoch,
                    probe: true,
                })
            }
            State::HalfOpen { .. } => {
                self.counts.rejected += 1;
                Admission::Refused {
                    retry_after_ns: HALF_OPEN_RETRY_NS,
                }
            }
            State::Open { until_ns } => {
                let retry_after_ns = until_ns.saturating_sub(now_ns);
                self.counts.rejected += 1;
                Admission::Refused { retry_after_ns }
            }
        }
    }

    /// How an admitted call went: `failed` (a 5xx, no answer, a timeout), and `took_ns`
    /// from admission to its response head. The new state if this changed it.
    pub(crate) fn finish(
        &mut self,
        ticket: Ticket,
        now_ns: u64,
        failed: bool,
        took_ns: u64,
    ) -> Option<BreakerState> {
        self.advance(now_ns);
        if ticket.epoch != self.epoch {
            return None;
        }
        let slow = took_ns > self.slow_call_ns;
        match &mut self.state {
            State::Closed => {
                self.window.record(now_ns, failed, slow);
                let totals = self.window.totals(now_ns);
                if totals.calls >= self.settings.min_calls
                    && (share(totals.failures, totals.calls) >= self.settings.error_ratio
                        || share(totals.slow, totals.calls) >= self.settings.slow_ratio)
                {
                    self.open(now_ns);
                    return Some(BreakerState::Open);
                }
                None
            }
            State::HalfOpen { succeeded, .. } if ticket.probe => {
                if failed || slow {
                    self.open(now_ns);
                    return Some(BreakerState::Open);
                }
                *succeeded += 1;
                if *succeeded >= self.settings.probes {
                    self.enter(State::Closed);
                    self.counts.closed += 1;
                    return Some(BreakerState::Closed);
                }
                None
            }
            _ => None,
        }
    }

    /// An admitted call that ended without saying anything of the upstream (the client's
    /// body failed, the client went away): a probe's slot is free again.
    pub(crate) fn abandon(&mut self, ticket: Ticket) {
        if ticket.epoch != self.epoch || !ticket.probe {
            return;
        }
        if let State::HalfOpen { admitted, .. } = &mut self.state {
            *admitted = admitted.saturating_sub(1);
        }
    }

    /// The state at `now` (an open circuit whose wait is over is half-open).
    pub(crate) fn snapshot(&mut self, now_ns: u64) -> Snapshot {
        self.advance(now_ns);
        let (state, open_remaining_ns) = match self.state {
            State::Closed => (BreakerState::Closed, None),
            State::Open { until_ns } => (BreakerState::Open, Some(until_ns.saturating_sub(now_ns))),
            State::HalfOpen { .. } => (BreakerState::HalfOpen, None),
        };
        Snapshot {
            state,
            open_remaining_ns,
            window: self.window.totals(now_ns),
            counts: self.counts,
        }
    }

    /// Open → half-open once the wait is over.
    fn advance(&mut self, now_ns: u64) {
        if let State::Open { until_ns } = self.state {
            if now_ns >= until_ns {
                self.enter(State::HalfOpen {
                    admitted: 0,
                    succeeded: 0,
                });
                self.counts.half_opened += 1;
            }
        }
    }

    fn open(&mut self, now_ns: u64) {
        self.enter(State::Open {
            until_ns: now_ns.saturating_add(self.open_for_ns),
        });
        self.counts.opened += 1;
    }

    /// A new state, a new epoch, an empty window.
    fn enter(&mut self, state: State) {
        self.state = state;
        self.epoch = self.epoch.wrapping_add(1);
        self.window.clear();
    }
}

/// `part / whole` (whole > 0).
fn share(part: u32, whole: u32) -> f64 {
    f64::from(part) / f64::from(whole.max(1))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weir_core::{Clock, ManualClock};

    use super::*;

    const MS: u64 = 1_000_000;

    /// 50 % errors or 80 % slow (over 100 ms) of at least 4 calls in 10 s opens for 30 s;
    /// 2 probes.
    fn breaker() -> (Machine, ManualClock) {
        let settings = BreakerSettings {
            error_ratio: 0.5,
            slow_call: Duration::from_millis(100),
            slow_ratio: 0.8,
            window: Duration::from_secs(10),
            min_calls: 4,
            open_for: Duration::from_secs(30),
            probes: 2,
        };
        settings.check().unwrap();
        (Machine::new(settings), ManualClock::new(1_000 * 1_000 * MS))
    }

    /// One call admitted now that takes `took_ms` on the clock and fails or not.
    fn call(
        m: &mut Machine,
        clock: &ManualClock,
        failed: bool,
        took_ms: u64,
    ) -> Option<BreakerState> {
        let Admission::Admitted(ticket) = m.admit(clock.now_ns()) else {
            panic!("refused: {:?}", m.snapshot(clock.now_ns()));
        };
        clock.advance(Duration::from_millis(took_ms));
        m.finish(ticket, clock.now_ns(), failed, took_ms * MS)
    }

    fn state(m: &mut Machine, clock: &ManualClock) -> BreakerState {
        m.snapshot(clock.now_ns()).state
    }

    /// Opens the breaker with four failed calls.
    fn opened() -> (Machine, ManualClock) {
        let (mut m, clock) = breaker();
        for _ in 0..3 {
            assert_eq!(call(&mut m, &clock, true, 1), None);
        }
        assert_eq!(call(&mut m, &clock, true, 1), Some(BreakerState::Open));
        (m, clock)
    }

    #[test]
    fn closed_stays_closed_below_the_minimum_of_calls_whatever_they_did() {
        let (mut m, clock) = breaker();
        for _ in 0..3 {
            assert_eq!(call(&mut m, &clock, true, 1_000), None);
        }
        assert_eq!(state(&mut m, &clock), BreakerState::Closed);
        assert_eq!(m.snapshot(clock.now_ns()).window.calls, 3);
    }

    #[test]
    fn closed_opens_at_the_error_ratio() {
        let (mut m, clock) = breaker();
        assert_eq!(call(&mut m, &clock, false, 1), None);
        assert_eq!(call(&mut m, &clock, false, 1), None);
        assert_eq!(call(&mut m, &clock, true, 1), None);
        assert_eq!(
            state(&mut m, &clock),
            BreakerState::Closed,
            "3 calls: too few"
        );
        // 2 of 4 failed: 50 %.
        assert_eq!(call(&mut m, &clock, true, 1), Some(BreakerState::Open));
        let s = m.snapshot(clock.now_ns());
        assert_eq!(s.state, BreakerState::Open);
        assert_eq!(s.open_remaining_ns, Some(30_000 * MS));
        assert_eq!(s.counts.opened, 1);
    }

    #[test]
    fn closed_opens_at_the_slow_ratio_even_when_every_call_succeeds() {
        let (mut m, clock) = breaker();
        // 100 ms is not slower than the threshold; 101 ms is.
        assert_eq!(call(&mut m, &clock, false, 100), None);
        for _ in 0..3 {
            assert_eq!(call(&mut m, &clock, false, 101), None);
        }
        assert_eq!(
            state(&mut m, &clock),
            BreakerState::Closed,
            "3 of 4 slow: 75 %"
        );
        // 4 of 5 slow: 80 %.
        assert_eq!(call(&mut m, &clock, false, 500), Some(BreakerState::Open));
    }

    #[test]
    fn calls_older_than_the_window_no_longer_count() {
        let (mut m, clock) = breaker();
        for _ in 0..3 {
            call(&mut m, &clock, true, 1);
        }
        clock.advance(Duration::from_secs(11));
        // Three old failures are gone: one new failure of one call is below the minimum.
        assert_eq!(call(&mut m, &clock, true, 1), None);
        assert_eq!(m.snapshot(clock.now_ns()).window.calls, 1);
        assert_eq!(state(&mut m, &clock), BreakerState::Closed);
    }

    #[test]
    fn open_refuses_for_the_rest_of_its_wait_then_half_opens() {
        let (mut m, clock) = opened();
        assert_eq!(
            m.admit(clock.now_ns()),
            Admission::Refused {
                retry_after_ns: 30_000 * MS
            }
        );
        clock.advance(Duration::from_millis(29_500));
        assert_eq!(
            m.admit(clock.now_ns()),
            Admission::Refused {
                retry_after_ns: 500 * MS
            }
        );
        assert_eq!(m.snapshot(clock.now_ns()).counts.rejected, 2);
        clock.advance(Duration::from_millis(500));
        let s = m.snapshot(clock.now_ns());
        assert_eq!((s.state, s.counts.half_opened), (BreakerState::HalfOpen, 1));
    }

    #[test]
    fn half_open_lets_exactly_the_probes_through_and_closes_when_they_succeed() {
        let (mut m, clock) = opened();
        clock.advance(Duration::from_secs(30));
        let Admission::Admitted(first) = m.admit(clock.now_ns()) else {
            panic!("a probe")
        };
        let Admission::Admitted(second) = m.admit(clock.now_ns()) else {
            panic!("a probe")
        };
        assert_eq!(
            m.admit(clock.now_ns()),
            Admission::Refused {
                retry_after_ns: HALF_OPEN_RETRY_NS
            },
            "a third waits for the probes"
        );
        assert_eq!(m.finish(first, clock.now_ns(), false, MS), None);
        assert_eq!(state(&mut m, &clock), BreakerState::HalfOpen);
        assert_eq!(
            m.finish(second, clock.now_ns(), false, MS),
            Some(BreakerState::Closed)
        );
        let s = m.snapshot(clock.now_ns());
        assert_eq!(
            (s.state, s.counts.closed, s.window.calls),
            (BreakerState::Closed, 1, 0)
        );
        // Closed afresh: the failures before it opened are forgotten.
        assert_eq!(call(&mut m, &clock, true, 1), None);
    }

    #[test]
    fn half_open_opens_again_on_a_failed_probe_or_a_slow_one() {
        for (failed, took_ms) in [(true, 1), (false, 101)] {
            let (mut m, clock) = opened();
            clock.advance(Duration::from_secs(30));
            let Admission::Admitted(probe) = m.admit(clock.now_ns()) else {
                panic!("a probe")
            };
            let Admission::Admitted(other) = m.admit(clock.now_ns()) else {
                panic!("a probe")
            };
            clock.advance(Duration::from_millis(took_ms));
            assert_eq!(
                m.finish(probe, clock.now_ns(), failed, took_ms * MS),
                Some(BreakerState::Open)
            );
            let s = m.snapshot(clock.now_ns());
            assert_eq!(s.open_remaining_ns, Some(30_000 * MS), "a full wait again");
            assert_eq!(s.counts.opened, 2);
            // The other probe, of the half-open period that ended, changes nothing.
            assert_eq!(m.finish(other, clock.now_ns(), false, MS), None);
            assert_eq!(state(&mut m, &clock), BreakerState::Open);
        }
    }

    #[test]
    fn an_abandoned_probe_frees_its_slot() {
        let (mut m, clock) = opened();
        clock.advance(Duration::from_secs(30));
        let mut tickets = Vec::new();
        for _ in 0..2 {
            let Admission::Admitted(t) = m.admit(clock.now_ns()) else {
                panic!("a probe")
            };
            tickets.push(t);
        }
        assert!(matches!(m.admit(clock.now_ns()), Admission::Refused { .. }));
        m.abandon(tickets[0]);
        let Admission::Admitted(again) = m.admit(clock.now_ns()) else {
            panic!("the slot is free again")
        };
        assert_eq!(m.finish(tickets[1], clock.now_ns(), false, MS), None);
        assert_eq!(
            m.finish(again, clock.now_ns(), false, MS),
            Some(BreakerState::Closed)
        );
    }

    #[test]
    fn a_call_sent_while_closed_that_answers_after_the_circuit_opened_changes_nothing() {
        let (mut m, clock) = breaker();
        let Admission::Admitted(late) = m.admit(clock.now_ns()) else {
            panic!("closed")
        };
        for _ in 0..4 {
            call(&mut m, &clock, true, 1);
        }
        assert_eq!(state(&mut m, &clock), BreakerState::Open);
        clock.advance(Duration::from_secs(30));
        // Half-open now: the late answer is not a probe's, and abandoning it frees nothing.
        assert_eq!(m.finish(late, clock.now_ns(), false, MS), None);
        m.abandon(late);
        assert_eq!(state(&mut m, &clock), BreakerState::HalfOpen);
        let s = m.snapshot(clock.now_ns());
        assert_eq!(
            s.counts,
            Counts {
                opened: 1,
                half_opened: 1,
                closed: 0,
                rejected: 0
            }
        );
    }
}
