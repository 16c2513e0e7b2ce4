//! What each algorithm promises, checked from the outside on a trace of one key's checks.
//! These do not run the algorithm: they look only at arrival times, costs and answers, so
//! they catch a wrong step in the model and in every store alike.

use weir_core::{Algorithm, Decision, Rule, WarmUp};

/// One check of one key, as answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// When it arrived.
    pub at_ns: u64,
    /// Its cost (at least 1; peeks are not part of a trace).
    pub cost: u64,
    /// The answer.
    pub decision: Decision,
}

fn admitted(trace: &[Checked]) -> Vec<(u64, u64, u64)> {
    trace
        .iter()
        .filter(|c| c.decision.allowed)
        .map(|c| {
            let delay = u64::try_from(c.decision.delay.as_nanos()).unwrap_or(u64::MAX);
            (c.at_ns, c.cost, delay)
        })
        .collect()
}

/// The most units admitted in any half-open window `[t, t + len)`.
pub fn max_in_any_window(trace: &[Checked], len_ns: u64) -> u64 {
    let hits = admitted(trace);
    hits.iter()
        .map(|&(start, _, _)| {
            hits.iter()
                .filter(|&&(t, _, _)| t >= start && t - start < len_ns)
                .map(|&(_, c, _)| c)
                .sum::<u64>()
        })
        .max()
        .unwrap_or(0)
}

/// A warm-up rule's ramp (`weir_core::WarmUp`): the trace starts on a cold key, so every
/// admitted check of `n` at `s + τ` (`s` the first admission) had at most units `u`
/// admitted before it with `G(u·T) ≤ τ + (B − n)·T`, `G` the ramp's time. (A key cold
/// again after idling only admits less: `G` is subadditive.)
fn warm_ramp(
    warmup: &WarmUp,
    burst: u64,
    interval: u64,
    hits: &[(u64, u64, u64)],
) -> Result<(), String> {
    let Some(&(start, _, _)) = hits.first() else {
        return Ok(());
    };
    let mut before = 0u64;
    for &(t, n, _) in hits {
        let ramp_ns = warmup.ramp_time_ns(before * interval);
        let bound_ns = (t - start) + (burst - n) * interval;
        if ramp_ns > bound_ns {
            return Err(format!(
                "warm-up: {before} units before the check of {n} at {t} take {ramp_ns} ns of \
                 the ramp from the cold start at {start}, above {bound_ns}"
            ));
        }
        before += n;
    }
    Ok(())
}

/// Checks the rule's promise on a trace of one key with checks only (no penalty, reward,
/// block or reset in between, no lockout). Returns what was broken.
pub fn check(rule: &Rule, trace: &[Checked]) -> Result<(), String> {
    let limit = rule.limit();
    let window_ns = u64::try_from(rule.window().as_nanos()).unwrap_or(u64::MAX);
    let hits = admitted(trace);
    match rule.algorithm() {
        Algorithm::SlidingLog(_) => {
            let max = max_in_any_window(trace, window_ns);
            if max > limit {
                return Err(format!(
                    "sliding log admitted {max} > {limit} in one window"
                ));
            }
        }
        Algorithm::FixedWindow(_) => {
            let mut per_window = std::collections::BTreeMap::<u64, u64>::new();
            for &(t, c, _) in &hits {
                *per_window.entry(t / window_ns).or_default() += c;
            }
            if let Some((w, n)) = per_window.iter().find(|(_, n)| **n > limit) {
                return Err(format!("fixed window {w} admitted {n} > {limit}"));
            }
        }
        Algorithm::SlidingWindow(s) => {
            // At most `limit` in any W/P consecutive aligned buckets.
            let p = s.precision_ns();
            let k = window_ns / p;
            for &(t, _, _) in &hits {
                let first = t / p;
                let n: u64 = hits
                    .iter()
                    .filter(|&&(u, _, _)| u / p >= first && u / p < first + k)
                    .map(|&(_, c, _)| c)
                    .sum();
                if n > limit {
                    return Err(format!("{n} > {limit} in {k} buckets from bucket {first}"));
                }
            }
        }
        Algorithm::WeightedWindow(_) => {
            let max = max_in_any_window(trace, window_ns);
            if max >= 2 * limit {
                return Err(format!("weighted window admitted {max} >= 2×{limit}"));
            }
        }
        Algorithm::TokenBucket(_) | Algorithm::LeakyBucket(_) | Algorithm::Gcra(_) => {
            let interval = match rule.algorithm() {
                Algorithm::TokenBucket(a) => a.interval_ns(),
                Algorithm::LeakyBucket(a) => a.interval_ns(),
                Algorithm::Gcra(a) => a.interval_ns(),
                _ => 1,
            };
            if let Some(warmup) = rule.warmup() {
                warm_ramp(warmup, limit, interval, &hits)?;
            }
            for (i, &(a, _, _)) in hits.iter().enumerate() {
                let mut sum = 0;
                for &(b, c, _) in &hits[i..] {
                    sum += c;
                    let bound = limit + (b - a) / interval;
                    if sum > bound {
                        return Err(format!(
                            "{sum} units admitted in [{a}, {b}], above burst + rate·t = {bound}"
                        ));
                    }
                }
            }
        }
        Algorithm::LeakyQueue(q) => {
            let t = q.interval_ns();
            for pair in hits.windows(2) {
                let (a, ca, da) = pair[0];
                let (b, _, db) = pair[1];
                if b + db < a + da + ca * t {
                    return Err(format!(
                        "sends at {} and {} are closer than {} units apart",
                        a + da,
                        b + db,
                        ca
                    ));
                }
            }
            if let Some(&(_, _, d)) = hits.iter().find(|h| h.2 > q.max_wait_ns()) {
                return Err(format!("delay {d} above max_wait {}", q.max_wait_ns()));
            }
        }
        Algorithm::Concurrency(_) => {}
        _ => {}
    }
    Ok(())
}
