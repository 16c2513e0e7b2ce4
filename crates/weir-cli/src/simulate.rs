//! The simulation: replays [`Traffic`] through every rule on one `weir-core` memory store,
//! at instants set by hand (a manual clock), and tallies allowed and denied requests per
//! reporting interval. Pure apart from the in-memory store; no wall clock, no output
//! (`render.rs` and `svg.rs` draw the [`Report`]).

use std::fmt;

use weir_core::{CheckError, Key, KeyError, MemoryStore, Op, Outcome};

use crate::duration::{format_duration, nanos, SECOND_NS};
use crate::spec::RuleSpec;
use crate::traffic::Traffic;

/// The simulation starts at 2023-11-15T00:00:00Z, a whole number of days since the epoch, so
/// epoch-aligned windows (fixed, weighted, sliding-counter buckets) of any length that
/// divides a day start exactly at t = 0.
pub(crate) const START_NS: u64 = 1_700_006_400 * SECOND_NS;

/// The most reporting intervals (table rows, chart bars) one simulation produces.
pub(crate) const MAX_INTERVALS: u64 = 10_000;

/// What to simulate.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scenario<'a> {
    /// The rules, each with its own keys (they never share state).
    pub(crate) rules: &'a [RuleSpec],
    /// The requests; those at or after `duration_ns` are ignored.
    pub(crate) traffic: &'a Traffic,
    /// Length of the simulation.
    pub(crate) duration_ns: u64,
    /// Length of one reporting interval.
    pub(crate) interval_ns: u64,
    /// Units each request uses.
    pub(crate) cost: u64,
}

/// Allowed and denied requests of one rule over some span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Tally {
    /// Requests the rule allowed.
    pub(crate) allowed: u64,
    /// Requests the rule denied.
    pub(crate) denied: u64,
    /// Sum of the delays of the allowed requests (leaky queue; zero otherwise).
    pub(crate) delay_ns: u128,
}

impl Tally {
    /// Mean delay of the allowed requests; `None` when none was allowed.
    pub(crate) fn mean_delay_ns(&self) -> Option<u64> {
        (self.allowed > 0)
            .then(|| u64::try_from(self.delay_ns / u128::from(self.allowed)).unwrap_or(u64::MAX))
    }

    fn add(&mut self, other: &Self) {
        self.allowed += other.allowed;
        self.denied += other.denied;
        self.delay_ns += other.delay_ns;
    }
}

/// One reporting interval `[start_ns, end_ns)` (offsets from the start), or the whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Row {
    /// Start, from the beginning of the simulation.
    pub(crate) start_ns: u64,
    /// End (exclusive); the last interval may be shorter.
    pub(crate) end_ns: u64,
    /// Requests sent in the span (every rule sees all of them).
    pub(crate) sent: u64,
    /// One tally per rule, in rule order.
    pub(crate) tallies: Vec<Tally>,
}

/// The outcome of a simulation: one row per interval and a total.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    /// The rules, in the order given.
    pub(crate) rules: Vec<RuleSpec>,
    /// One row per interval, in time order.
    pub(crate) rows: Vec<Row>,
    /// The whole run.
    pub(crate) total: Row,
    /// Length of one interval.
    pub(crate) interval_ns: u64,
    /// Units each request used.
    pub(crate) cost: u64,
    /// How many distinct keys the replayed requests used.
    pub(crate) keys: usize,
}

/// Why a simulation could not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SimulateError {
    /// `--duration` or `--interval` is zero.
    Zero(&'static str),
    /// Too many reporting intervals.
    TooManyIntervals { intervals: u64 },
    /// The cost is above a rule's limit: no request could ever pass.
    CostAboveLimit { rule: String, cost: u64, limit: u64 },
    /// A namespaced key was rejected.
    Key { key: String, source: KeyError },
    /// `weir-core` could not decide.
    Check { rule: String, source: CheckError },
}

impl fmt::Display for SimulateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Zero(what) => write!(f, "{what} must be greater than zero"),
            Self::TooManyIntervals { intervals } => write!(
                f,
                "--duration / --interval makes {intervals} intervals, above the maximum of \
                 {MAX_INTERVALS}; use a longer --interval"
            ),
            Self::CostAboveLimit { rule, cost, limit } => write!(
                f,
                "--cost {cost} is above the limit of `{rule}` ({limit}); no request could ever pass"
            ),
            Self::Key { key, source } => write!(f, "key `{key}`: {source}"),
            Self::Check { rule, source } => write!(f, "rule `{rule}`: {source}"),
        }
    }
}

impl std::error::Error for SimulateError {}

/// Replays the traffic through every rule and tallies the decisions per interval.
pub(crate) fn run(scenario: &Scenario<'_>) -> Result<Report, SimulateError> {
    let Scenario {
        rules,
        traffic,
        duration_ns,
        interval_ns,
        cost,
    } = *scenario;
    if duration_ns == 0 {
        return Err(SimulateError::Zero("--duration"));
    }
    if interval_ns == 0 {
        return Err(SimulateError::Zero("--interval"));
    }
    let intervals = duration_ns.div_ceil(interval_ns);
    if intervals > MAX_INTERVALS {
        return Err(SimulateError::TooManyIntervals { intervals });
    }
    for spec in rules {
        if cost > spec.rule.limit() {
            return Err(SimulateError::CostAboveLimit {
                rule: spec.text.clone(),
                cost,
                limit: spec.rule.limit(),
            });
        }
    }

    // keys[rule][key]: each rule counts in its own namespace.
    let keys = rules
        .iter()
        .enumerate()
        .map(|(r, _)| {
            traffic
                .keys
                .iter()
                .map(|k| {
                    let key = format!("rule{r}:{k}");
                    Key::new(&key).map_err(|source| SimulateError::Key { key, source })
                })
                .collect::<Result<Vec<_>, _>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Room for every key of every rule, so a full shard never fails a run.
    let capacity = traffic
        .keys
        .len()
        .saturating_mul(rules.len())
        .saturating_mul(2)
        .max(1 << 16);
    let store = MemoryStore::builder().capacity(capacity).build();

    let mut rows: Vec<Row> = (0..intervals)
        .map(|i| Row {
            start_ns: i * interval_ns,
            end_ns: ((i + 1) * interval_ns).min(duration_ns),
            sent: 0,
            tallies: vec![Tally::default(); rules.len()],
        })
        .collect();
    let mut used = vec![false; traffic.keys.len()];
    for arrival in traffic.arrivals.iter().filter(|a| a.at_ns < duration_ns) {
        if let Some(u) = used.get_mut(arrival.key) {
            *u = true;
        }
        let index = usize::try_from(arrival.at_ns / interval_ns).unwrap_or(usize::MAX);
        let Some(row) = rows.get_mut(index) else {
            continue;
        };
        row.sent += 1;
        let now_ns = START_NS.saturating_add(arrival.at_ns);
        for ((spec, rule_keys), tally) in rules.iter().zip(&keys).zip(&mut row.tallies) {
            let Some(key) = rule_keys.get(arrival.key) else {
                continue;
            };
            let failed = |source| SimulateError::Check {
                rule: spec.text.clone(),
                source,
            };
            let decision = match store
                .apply_now(key, &spec.rule, Op::Check { cost }, now_ns)
                .map_err(failed)?
            {
                Outcome::Decision(d) => d,
                _ => {
                    return Err(failed(CheckError::Unsupported {
                        op: "check",
                        algorithm: spec.algorithm(),
                    }))
                }
            };
            if decision.allowed {
                tally.allowed += 1;
                tally.delay_ns += u128::from(nanos(decision.delay));
            } else {
                tally.denied += 1;
            }
        }
    }

    let mut total = Row {
        start_ns: 0,
        end_ns: duration_ns,
        sent: 0,
        tallies: vec![Tally::default(); rules.len()],
    };
    for row in &rows {
        total.sent += row.sent;
        for (sum, tally) in total.tallies.iter_mut().zip(&row.tallies) {
            sum.add(tally);
        }
    }
    Ok(Report {
        rules: rules.to_vec(),
        rows,
        total,
        interval_ns,
        cost,
        keys: used.iter().filter(|&&u| u).count(),
    })
}

impl Report {
    /// Length of the simulation.
    pub(crate) fn duration_ns(&self) -> u64 {
        self.total.end_ns
    }

    /// One line describing the run, for the table header and the chart's subtitle.
    pub(crate) fn summary(&self) -> String {
        let keys = match self.keys {
            1 => "1 key".to_owned(),
            n => format!("{n} keys"),
        };
        format!(
            "{} requests over {} in {} intervals, cost {} each, {keys}",
            self.total.sent,
            format_duration(self.duration_ns()),
            format_duration(self.interval_ns),
            self.cost,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::parse_rule;
    use crate::traffic::{generate, parse_file, Pattern};
    use std::time::Duration;

    fn specs(texts: &[&str]) -> Vec<RuleSpec> {
        texts.iter().map(|t| parse_rule(t).unwrap()).collect()
    }

    fn counts(report: &Report, rule: usize) -> Vec<(u64, u64)> {
        report
            .rows
            .iter()
            .map(|r| (r.tallies[rule].allowed, r.tallies[rule].denied))
            .collect()
    }

    #[test]
    fn the_start_is_a_utc_midnight() {
        assert_eq!(START_NS % (86_400 * SECOND_NS), 0);
    }

    #[test]
    fn four_algorithms_meet_two_bursts_across_a_window_boundary() {
        let rules = specs(&[
            "fixed_window:limit=10,window=1s",
            "sliding_log:limit=10,window=1s",
            "token_bucket:capacity=10,rate=10,per=1s",
            "gcra:rate=10,per=1s,burst=10",
        ]);
        let text = "0.9\n".repeat(30) + &"1.1\n".repeat(30);
        let traffic = parse_file(&text, 1).unwrap();
        let report = run(&Scenario {
            rules: &rules,
            traffic: &traffic,
            duration_ns: 3 * SECOND_NS,
            interval_ns: SECOND_NS,
            cost: 1,
        })
        .unwrap();
        // Fixed window: 10 in [0, 1s) and 10 more in [1s, 2s), 0.2 s apart.
        assert_eq!(counts(&report, 0), [(10, 20), (10, 20), (0, 0)]);
        // Sliding log: the 10 at 0.9 s count until 1.9 s.
        assert_eq!(counts(&report, 1), [(10, 20), (0, 30), (0, 0)]);
        // Token bucket and GCRA: 0.2 s refills 2 of the 10.
        assert_eq!(counts(&report, 2), [(10, 20), (2, 28), (0, 0)]);
        assert_eq!(counts(&report, 3), [(10, 20), (2, 28), (0, 0)]);
        assert_eq!(report.total.sent, 60);
        assert_eq!(report.total.tallies[1].allowed, 10);
    }

    #[test]
    fn the_leaky_queue_reports_its_delays() {
        let rules = specs(&["leaky_queue:rate=10,per=1s,max_depth=5"]);
        let pattern = Pattern::Burst {
            size: 8,
            every: None,
            offset: Duration::ZERO,
            background: None,
        };
        let traffic = generate(&pattern, SECOND_NS, 1).unwrap();
        let report = run(&Scenario {
            rules: &rules,
            traffic: &traffic,
            duration_ns: SECOND_NS,
            interval_ns: SECOND_NS,
            cost: 1,
        })
        .unwrap();
        let t = report.total.tallies[0];
        assert_eq!((t.allowed, t.denied), (5, 3));
        // Delays 0, 100, 200, 300 and 400 ms.
        assert_eq!(t.mean_delay_ns(), Some(200_000_000));
    }

    #[test]
    fn keys_and_rules_do_not_share_state() {
        let rules = specs(&[
            "fixed_window:limit=1,window=1s",
            "fixed_window:limit=1,window=1s",
        ]);
        let traffic = parse_file("0 a\n0 b\n0 a\n", 1).unwrap();
        let report = run(&Scenario {
            rules: &rules,
            traffic: &traffic,
            duration_ns: SECOND_NS,
            interval_ns: SECOND_NS,
            cost: 1,
        })
        .unwrap();
        assert_eq!(counts(&report, 0), [(2, 1)]);
        assert_eq!(counts(&report, 1), [(2, 1)]);
        assert_eq!(report.keys, 2, "the unused default key is not counted");
    }

    #[test]
    fn bad_scenarios_are_refused() {
        let rules = specs(&["gcra:rate=10,per=1s,burst=5"]);
        let traffic = parse_file("0\n", 1).unwrap();
        let scenario = Scenario {
            rules: &rules,
            traffic: &traffic,
            duration_ns: SECOND_NS,
            interval_ns: SECOND_NS,
            cost: 6,
        };
        assert_eq!(
            run(&scenario).unwrap_err().to_string(),
            "--cost 6 is above the limit of `gcra:rate=10,per=1s,burst=5` (5); \
             no request could ever pass"
        );
        let too_fine = Scenario {
            cost: 1,
            interval_ns: 1_000,
            ..scenario
        };
        assert!(matches!(
            run(&too_fine),
            Err(SimulateError::TooManyIntervals {
                intervals: 1_000_000
            })
        ));
    }

    #[test]
    fn a_short_last_interval_ends_at_the_duration() {
        let rules = specs(&["gcra:rate=10,per=1s,burst=5"]);
        let traffic = parse_file("0\n2.4\n2.5\n", 1).unwrap();
        let report = run(&Scenario {
            rules: &rules,
            traffic: &traffic,
            duration_ns: 2_500_000_000,
            interval_ns: SECOND_NS,
            cost: 1,
        })
        .unwrap();
        assert_eq!(report.rows.len(), 3);
        assert_eq!(report.rows[2].end_ns, 2_500_000_000);
        assert_eq!(report.total.sent, 2, "the request at the end is outside");
        assert_eq!(
            report.summary(),
            "2 requests over 2.5s in 1s intervals, cost 1 each, 1 key"
        );
    }
}
