//! The in-flight gate: at most the limit inside the inner service; the rest wait in one
//! bounded line, highest priority first (oldest first within one), each up to the max
//! wait. When the line is full, a newcomer of a higher priority pushes out the newest of
//! the lowest priority waiting; anyone else is shed. So under overload lower priorities
//! (crawlers) are shed before higher ones (readers). With an adaptive limit every
//! finished request is a sample for `weir_core::adaptive::GradientLimit`, timed on the
//! layer's clock, and the limit it answers is the one enforced.
//!
//! Runs in `service.rs` after the rate limits allowed a request; the [`Slot`] it gives is
//! held until the inner service's response head is back.

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;
use weir_core::adaptive::{GradientLimit, Sample};
use weir_core::Clock;

use crate::in_flight::{InFlightLimit, InFlightStats};

/// A waiter's place in line: higher priorities first, then arrival order.
type Place = (Reverse<u8>, u64);

/// The limit in force.
#[derive(Debug)]
enum Limit {
    Fixed(usize),
    Adaptive(Box<GradientLimit>),
}

impl Limit {
    fn get(&self) -> usize {
        match self {
            Self::Fixed(n) => *n,
            Self::Adaptive(limit) => limit.limit(),
        }
        .max(1)
    }
}

#[derive(Debug)]
struct State {
    limit: Limit,
    inside: usize,
    /// Waiters; the sender carries the count inside once the slot is theirs.
    line: BTreeMap<Place, oneshot::Sender<usize>>,
    next: u64,
}

/// The shared state of the gate: one per layer, shared by every clone of its service.
#[derive(Debug)]
pub(crate) struct Gate {
    settings: InFlightLimit,
    state: Mutex<State>,
    shed: [AtomicU64; 256],
    admitted: [AtomicU64; 256],
}

/// A slot inside the inner service. [`finish`](Slot::finish) it with the outcome (an
/// adaptive limit learns from it); dropped unfinished (the caller went away), it frees the
/// slot and teaches nothing.
#[derive(Debug)]
pub(crate) struct Slot {
    gate: Arc<Gate>,
    start_ns: u64,
    in_flight: usize,
    done: bool,
}

impl Gate {
    /// The gate for `settings`. Adaptive knobs that do not validate (only a struct built
    /// by hand, not through `InFlightLimit::adaptive`, can have them) fall back to a fixed
    /// limit of their `min_limit`: the lowest the operator allowed, never "no limit".
    pub(crate) fn new(settings: InFlightLimit) -> Self {
        let limit = match settings.adaptive.map(GradientLimit::new) {
            Some(Ok(adaptive)) => Limit::Adaptive(Box::new(adaptive)),
            Some(Err(error)) => {
                let floor = settings
                    .adaptive
                    .map_or(1, |a| a.min_limit.min(settings.max_in_flight));
                tracing::warn!(%error, floor, "in-flight limit: bad adaptive knobs; a fixed limit of the floor instead");
                Limit::Fixed(floor.max(1))
            }
            None => Limit::Fixed(settings.max_in_flight.max(1)),
        };
        Self {
            settings,
            state: Mutex::new(State {
                limit,
                inside: 0,
                line: BTreeMap::new(),
                next: 0,
            }),
            shed: std::array::from_fn(|_| AtomicU64::new(0)),
            admitted: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    pub(crate) fn settings(&self) -> InFlightLimit {
        self.settings
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A slot for a request of `priority`, or `None`: shed (line full and nobody lower in
    /// it, pushed out by a higher priority, or the wait ran out).
    pub(crate) async fn acquire(self: &Arc<Self>, priority: u8, clock: &dyn Clock) -> Option<Slot> {
        let (place, receiver) = {
            let mut state = self.lock();
            if state.inside < state.limit.get() {
                state.inside += 1;
                let in_flight = state.inside;
                drop(state);
                return Some(self.slot(priority, clock, in_flight));
            }
            if state.line.len() >= self.settings.max_queued {
                let lowest = state.line.keys().next_back().copied();
                match lowest {
                    Some(lowest) if lowest.0 .0 < priority => {
                        // Dropping its sender tells the waiter it was pushed out.
                        state.line.remove(&lowest);
                    }
                    _ => {
                        drop(state);
                        return self.shed(priority);
                    }
                }
            }
            let place = (Reverse(priority), state.next);
            state.next = state.next.wrapping_add(1);
            let (sender, receiver) = oneshot::channel();
            state.line.insert(place, sender);
            (place, receiver)
        };
        let mut waiting = Waiting {
            gate: Arc::clone(self),
            place,
            receiver: Some(receiver),
        };
        let deadline_ns = clock
            .now_ns()
            .saturating_add(u64::try_from(self.settings.max_wait.as_nanos()).unwrap_or(u64::MAX));
        let answered = match waiting.receiver.as_mut() {
            Some(receiver) => tokio::select! {
                granted = receiver => Some(granted.ok()),
                () = clock.sleep_until(deadline_ns) => None,
            },
            None => Some(None),
        };
        let granted = match answered {
            Some(granted) => granted,
            None => waiting.give_up(),
        };
        waiting.receiver = None;
        match granted {
            Some(in_flight) => Some(self.slot(priority, clock, in_flight)),
            None => self.shed(priority),
        }
    }

    fn slot(self: &Arc<Self>, priority: u8, clock: &dyn Clock, in_flight: usize) -> Slot {
        if let Some(count) = self.admitted.get(usize::from(priority)) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        Slot {
            gate: Arc::clone(self),
            start_ns: clock.now_ns(),
            in_flight,
            done: false,
        }
    }

    fn shed(&self, priority: u8) -> Option<Slot> {
        if let Some(count) = self.shed.get(usize::from(priority)) {
            count.fetch_add(1, Ordering::Relaxed);
        }
        None
    }

    /// A slot is free (and, adaptive, a sample to learn from): let in whom the limit
    /// allows, highest priority first.
    fn release(&self, sample: Option<(u64, Sample)>) {
        let mut state = self.lock();
        state.inside = state.inside.saturating_sub(1);
        if let (Limit::Adaptive(limit), Some((now_ns, sample))) = (&mut state.limit, sample) {
            limit.sample(now_ns, sample);
        }
        admit_waiting(&mut state);
    }

    /// The figures now.
    pub(crate) fn stats(&self) -> InFlightStats {
        let state = self.lock();
        let (min_rtt, sample_rtt, measuring) = match &state.limit {
            Limit::Adaptive(limit) => {
                let s = limit.stats();
                (s.min_rtt, s.sample_rtt, s.measuring)
            }
            Limit::Fixed(_) => (None, None, false),
        };
        let by_priority = |counts: &[AtomicU64; 256]| {
            (0..=u8::MAX)
                .zip(counts.iter())
                .map(|(p, c)| (p, c.load(Ordering::Relaxed)))
                .filter(|(_, c)| *c > 0)
                .collect()
        };
        InFlightStats {
            limit: state.limit.get(),
            in_flight: state.inside,
            queued: state.line.len(),
            min_rtt,
            sample_rtt,
            measuring,
            shed: by_priority(&self.shed),
            admitted: by_priority(&self.admitted),
        }
    }
}

/// Lets waiters in while there is room (a waiter gone meanwhile gives its slot back).
fn admit_waiting(state: &mut State) {
    while state.inside < state.limit.get() {
        let Some((_, sender)) = state.line.pop_first() else {
            break;
        };
        state.inside += 1;
        if sender.send(state.inside).is_err() {
            state.inside -= 1;
        }
    }
}

/// A request in line; leaving (by any way, a dropped future included) takes it out of
/// line, and gives back a slot granted to it that it will not use.
struct Waiting {
    gate: Arc<Gate>,
    place: Place,
    receiver: Option<oneshot::Receiver<usize>>,
}

impl Waiting {
    /// The wait ran out: out of line, unless the slot came at the same moment.
    fn give_up(&mut self) -> Option<usize> {
        let mut state = self.gate.lock();
        if state.line.remove(&self.place).is_some() {
            return None;
        }
        drop(state);
        self.receiver.as_mut().and_then(|r| r.try_recv().ok())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let Some(mut receiver) = self.receiver.take() else {
            return;
        };
        let mut state = self.gate.lock();
        if state.line.remove(&self.place).is_none() && receiver.try_recv().is_ok() {
            state.inside = state.inside.saturating_sub(1);
            admit_waiting(&mut state);
        }
    }
}

impl Slot {
    /// The request is answered (`dropped`: the backend failed it or timed out), at the
    /// clock's `now_ns`.
    pub(crate) fn finish(mut self, now_ns: u64, dropped: bool) {
        self.done = true;
        let sample = Sample {
            rtt: Duration::from_nanos(now_ns.saturating_sub(self.start_ns)),
            in_flight: self.in_flight,
            dropped,
        };
        self.gate.release(Some((now_ns, sample)));
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if !self.done {
            self.gate.release(None);
        }
    }
}

#[cfg(test)]
mod tests;
