//! [`simulate`]: closed-loop clients (as `wrk -c N` does: each sends its next request as
//! soon as the last is answered) in front of a modelled backend ([`Knee`], which may
//! change mid-run), through a gate — none, a static in-flight limit, or the adaptive one.
//! Pure and deterministic: an event queue on simulated nanoseconds, no clock, no threads.
//! The tests of the adaptive limit and `weir simulate --backend` both run it.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

use super::gradient::{percentile, u64_to_f64, GradientLimit, Sample};
use super::knee::Knee;
use super::settings::{AdaptiveError, AdaptiveSettings};

/// What stands between the clients and the backend.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// Nothing: every request goes straight in.
    None,
    /// At most this many inside; the rest wait in line.
    Static(usize),
    /// The adaptive limit with these knobs; the rest wait in line.
    Adaptive(AdaptiveSettings),
}

/// From `from` on, the backend is `backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phase {
    /// When this phase starts (from the run's start).
    pub from: Duration,
    /// The backend during it.
    pub backend: Knee,
}

/// One second of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Second {
    /// Requests the backend completed in this second.
    pub goodput: u64,
    /// The gate's limit at the second's end (the clients' count without one).
    pub limit: usize,
    /// The 99th percentile latency the clients saw (line and backend) in this second.
    pub p99: Duration,
}

/// The result of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Second by second.
    pub seconds: Vec<Second>,
    /// Requests the backend completed per second, over the whole run.
    pub goodput: f64,
    /// The clients' median latency.
    pub p50: Duration,
    /// The clients' 99th percentile latency.
    pub p99: Duration,
}

/// A request inside the backend: when it ends, its number, when the client sent it, when
/// it went in, and how many were inside then.
type Inside = Reverse<(u64, u64, u64, u64, usize)>;

/// Runs `clients` closed-loop clients for `length` against the backend of `phases` (the
/// first phase should start at zero; without phases nothing runs) through `gate`.
pub fn simulate(
    gate: &Gate,
    phases: &[Phase],
    clients: usize,
    length: Duration,
) -> Result<Run, AdaptiveError> {
    let mut adaptive = match gate {
        Gate::Adaptive(settings) => Some(GradientLimit::new(*settings)?),
        _ => None,
    };
    let limit_of = |adaptive: &Option<GradientLimit>| match (gate, adaptive) {
        (Gate::Static(n), _) => (*n).max(1),
        (_, Some(limit)) => limit.limit(),
        _ => usize::MAX,
    };
    let backend_at = |t: u64| {
        phases
            .iter()
            .rev()
            .find(|p| u64::try_from(p.from.as_nanos()).unwrap_or(u64::MAX) <= t)
            .or(phases.first())
            .map(|p| p.backend)
    };
    let end = u64::try_from(length.as_nanos()).unwrap_or(u64::MAX);
    let mut line: VecDeque<u64> = (0..clients).map(|_| 0).collect();
    let mut inside: BinaryHeap<Inside> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut now = 0u64;
    let mut latencies: Vec<u64> = Vec::new();
    let mut second_latencies: Vec<u64> = Vec::new();
    let mut seconds = Vec::new();
    let mut second_goodput = 0u64;
    loop {
        // Let in whoever the limit allows.
        while inside.len() < limit_of(&adaptive) {
            let Some(sent) = line.pop_front() else { break };
            let Some(backend) = backend_at(now) else {
                return Ok(summary(seconds, &mut latencies, length));
            };
            let n = inside.len().saturating_add(1);
            let took = u64::try_from(backend.latency(n).as_nanos()).unwrap_or(u64::MAX);
            seq = seq.wrapping_add(1);
            inside.push(Reverse((now.saturating_add(took), seq, sent, now, n)));
        }
        let Some(Reverse((done, _, sent, went_in, n))) = inside.pop() else {
            break;
        };
        // Close the seconds that ended before this completion.
        while done >= (seconds.len() as u64 + 1).saturating_mul(1_000_000_000) {
            let p99 = percentile(&mut second_latencies, 0.99);
            seconds.push(Second {
                goodput: second_goodput,
                limit: limit_of(&adaptive).min(clients),
                p99: Duration::from_nanos(p99),
            });
            second_latencies.clear();
            second_goodput = 0;
            if seconds.len() as u64 * 1_000_000_000 >= end {
                return Ok(summary(seconds, &mut latencies, length));
            }
        }
        now = done;
        second_goodput += 1;
        let latency = done.saturating_sub(sent);
        latencies.push(latency);
        second_latencies.push(latency);
        if let Some(limit) = adaptive.as_mut() {
            limit.sample(
                now,
                Sample {
                    rtt: Duration::from_nanos(done.saturating_sub(went_in)),
                    in_flight: n,
                    dropped: false,
                },
            );
        }
        // The client sends its next request at once.
        line.push_back(now);
    }
    Ok(summary(seconds, &mut latencies, length))
}

fn summary(seconds: Vec<Second>, latencies: &mut [u64], length: Duration) -> Run {
    let total: u64 = seconds.iter().map(|s| s.goodput).sum();
    let secs = length.as_secs_f64();
    Run {
        seconds,
        goodput: if secs > 0.0 {
            u64_to_f64(total) / secs
        } else {
            0.0
        },
        p50: Duration::from_nanos(percentile(latencies, 0.5)),
        p99: Duration::from_nanos(percentile(latencies, 0.99)),
    }
}
