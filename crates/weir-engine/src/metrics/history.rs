//! [`History`]: decisions per second, allowed and denied, per rule over the last
//! [`HISTORY_SECONDS`], for the dashboard of `weir serve` (`/dashboard`). It sits beside
//! the path of a decision, never on it: a decision only bumps its rule's pre-built counters
//! (`decisions.rs`); once a second the engine's sampler (`Engine::spawn_background`) reads
//! those cumulative counters and puts what is new since the last sample into the current
//! second's bucket. A read ([`Engine::decision_history`](crate::Engine::decision_history))
//! samples first, so a denial shows at once.
//!
//! Seconds are the engine's clock's (a `ManualClock` in tests): the decisions counted
//! since the previous sample belong to the second of `now - 1 ns` (a sample taken exactly
//! on a second boundary closes the second before it).
//!
//! Memory is bounded whatever the rules: a ring of [`HISTORY_SECONDS`] buckets per rule
//! *with decisions in the window* (a rule that decides nothing has no ring), at most
//! [`MAX_SERIES`] rings, and the decisions of any further rule summed into one more ring
//! named [`OTHER_RULES`]. A ring whose last decision left the window is dropped. Limit
//! overrides sent by clients (counted in the metrics family, not in a rule's pre-built
//! counters) are not in the history.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use weir_config::RuleSet;

use super::decisions::{DecisionLabels, DecisionOutcome, RuleCounters};

/// How many seconds each rule's ring holds (5 minutes).
pub const HISTORY_SECONDS: usize = 300;

/// The most rules with a ring of their own; the decisions of further rules are summed into
/// the [`OTHER_RULES`] ring.
pub const MAX_SERIES: usize = 64;

/// The rule name of the ring that sums the rules past [`MAX_SERIES`].
pub const OTHER_RULES: &str = "(other rules)";

const NS_PER_S: u64 = 1_000_000_000;

/// Cumulative counts of one rule as its counters hold them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Totals {
    allowed: u64,
    denied: u64,
    shadow_denied: u64,
}

impl Totals {
    /// A rule's counters: `allowed` sums allowed, near-limit and unlimited decisions,
    /// `denied` enforced denials by a limit and by a store outage (fail closed).
    fn of(counters: &RuleCounters, rule: &str) -> Option<Totals> {
        let [allowed, near, denied, shadow_denied, unlimited, failed_closed] =
            counters.by_rule.get(rule)?;
        Some(Totals {
            allowed: allowed
                .get()
                .saturating_add(near.get())
                .saturating_add(unlimited.get()),
            denied: denied.get().saturating_add(failed_closed.get()),
            shadow_denied: shadow_denied.get(),
        })
    }

    /// A rule the RESP front end builds per command (`Engine::check_rule`): its counts are
    /// in the decisions family under [`DIRECT_DOMAIN`](super::DIRECT_DOMAIN), not in the
    /// rule files' counters. `None` before its first decision.
    fn of_direct(counters: &RuleCounters, rule: &str) -> Option<Totals> {
        let count = |outcome| {
            counters
                .family
                .get(&DecisionLabels {
                    domain: super::DIRECT_DOMAIN.to_string(),
                    rule: rule.to_string(),
                    outcome,
                })
                .map_or(0, |counter| counter.get())
        };
        let totals = Totals {
            allowed: count(DecisionOutcome::Allowed)
                .saturating_add(count(DecisionOutcome::NearLimit))
                .saturating_add(count(DecisionOutcome::Unlimited)),
            denied: count(DecisionOutcome::Denied)
                .saturating_add(count(DecisionOutcome::FailedClosed)),
            shadow_denied: count(DecisionOutcome::ShadowDenied),
        };
        (!totals.is_zero()).then_some(totals)
    }

    fn since(self, before: Totals) -> Totals {
        Totals {
            allowed: self.allowed.saturating_sub(before.allowed),
            denied: self.denied.saturating_sub(before.denied),
            shadow_denied: self.shadow_denied.saturating_sub(before.shadow_denied),
        }
    }

    fn is_zero(self) -> bool {
        self == Totals::default()
    }
}

/// One second of one ring: which second it holds, and its counts.
#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    second: u64,
    allowed: u32,
    denied: u32,
    shadow_denied: u32,
}

fn add(to: u32, n: u64) -> u32 {
    u32::try_from(n).map_or(u32::MAX, |n| to.saturating_add(n))
}

/// One rule's ring: bucket `second % HISTORY_SECONDS` holds `second` (a bucket holding an
/// older second reads as zero).
#[derive(Debug)]
struct Ring {
    domain: Arc<str>,
    rule: Arc<str>,
    buckets: Box<[Bucket]>,
    /// The latest second with a decision.
    last_second: u64,
}

impl Ring {
    fn new(domain: Arc<str>, rule: Arc<str>) -> Ring {
        Ring {
            domain,
            rule,
            buckets: vec![Bucket::default(); HISTORY_SECONDS].into_boxed_slice(),
            last_second: 0,
        }
    }

    fn slot(second: u64) -> usize {
        // The remainder is below HISTORY_SECONDS: it fits.
        usize::try_from(second % HISTORY_SECONDS as u64).unwrap_or(0)
    }

    fn add(&mut self, second: u64, counts: Totals) {
        if let Some(bucket) = self.buckets.get_mut(Self::slot(second)) {
            if bucket.second != second {
                *bucket = Bucket {
                    second,
                    ..Bucket::default()
                };
            }
            bucket.allowed = add(bucket.allowed, counts.allowed);
            bucket.denied = add(bucket.denied, counts.denied);
            bucket.shadow_denied = add(bucket.shadow_denied, counts.shadow_denied);
        }
        self.last_second = self.last_second.max(second);
    }

    /// Whether a decision of the `HISTORY_SECONDS` ending at `second` is in the ring.
    fn live_at(&self, second: u64) -> bool {
        self.last_second.saturating_add(HISTORY_SECONDS as u64) > second
    }

    /// The `seconds` ending at `end`, oldest first.
    fn view(&self, end: u64, seconds: usize) -> SeriesView {
        let mut view = SeriesView {
            domain: self.domain.to_string(),
            rule: self.rule.to_string(),
            allowed: Vec::with_capacity(seconds),
            denied: Vec::with_capacity(seconds),
            shadow_denied: Vec::with_capacity(seconds),
        };
        let first = end.saturating_add(1).saturating_sub(seconds as u64);
        for second in first..=end {
            let bucket = self
                .buckets
                .get(Self::slot(second))
                .filter(|b| b.second == second)
                .copied()
                .unwrap_or_default();
            view.allowed.push(bucket.allowed);
            view.denied.push(bucket.denied);
            view.shadow_denied.push(bucket.shadow_denied);
        }
        view
    }
}

#[derive(Debug, Default)]
struct State {
    /// Each rule's counts at the last sample (rules of earlier snapshots too, pruned to
    /// the rules in force when it grows past them by a margin).
    last: HashMap<Arc<str>, Totals>,
    rings: Vec<Ring>,
    other: Option<Ring>,
    /// The second of the last sample.
    second: u64,
}

impl State {
    /// Adds what rule `id` (of `domain`) counted since the last sample, `now` being its
    /// totals, to `second`: in its own ring, or [`OTHER_RULES`] past [`MAX_SERIES`].
    fn add(&mut self, domain: &Arc<str>, id: &Arc<str>, now: Totals, second: u64) {
        let before = self.last.insert(Arc::clone(id), now).unwrap_or_default();
        let new = now.since(before);
        if new.is_zero() {
            return;
        }
        let existing = self.rings.iter().position(|r| r.rule == *id);
        let ring = match existing {
            Some(i) => self.rings.get_mut(i),
            None if self.rings.len() < MAX_SERIES => {
                self.rings
                    .push(Ring::new(Arc::clone(domain), Arc::clone(id)));
                self.rings.last_mut()
            }
            None => Some(
                self.other
                    .get_or_insert_with(|| Ring::new("".into(), OTHER_RULES.into())),
            ),
        };
        if let Some(ring) = ring {
            ring.add(second, new);
        }
    }
}

/// The domain the RESP front end's own rules are shown under.
fn direct_domain() -> Arc<str> {
    Arc::from(super::DIRECT_DOMAIN)
}

/// Per-second decision counts per rule over the last [`HISTORY_SECONDS`]. Cheap to share
/// (`&self` methods, one mutex taken once a second and per read).
#[derive(Debug, Default)]
pub struct History {
    state: Mutex<State>,
}

/// One rule's decisions per second, oldest first (the dashboard's chart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SeriesView {
    /// The rule's domain (empty for [`OTHER_RULES`]).
    pub domain: String,
    /// The rule's id, or [`OTHER_RULES`].
    pub rule: String,
    /// Decisions allowed (near the limit and unlimited ones included).
    pub allowed: Vec<u32>,
    /// Decisions denied and enforced.
    pub denied: Vec<u32>,
    /// Decisions denied but not enforced (shadow mode, roll-out).
    pub shadow_denied: Vec<u32>,
}

/// The history as read: every rule with a decision in the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HistoryView {
    /// The Unix second of each series' last point (the one being filled now).
    pub end_unix_s: u64,
    /// Points in each series, one per second.
    pub seconds: usize,
    /// The rules with a decision in the window, in the order of their first decision.
    pub series: Vec<SeriesView>,
}

impl History {
    /// An empty history: the first sample counts every decision since the counters began.
    pub fn new() -> History {
        History::default()
    }

    /// Adds what `counters` (the snapshot in force, holding `rules`) counted since the last
    /// sample to the second of `now_ns - 1`.
    pub fn sample(&self, rules: &RuleSet, counters: &RuleCounters, now_ns: u64) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let state = &mut *state;
        // The clock never goes back; should a reading, the bucket still moves forwards only.
        let second = (now_ns.saturating_sub(1) / NS_PER_S).max(state.second);
        state.second = second;
        for info in rules.rules() {
            if let Some(now) = Totals::of(counters, &info.id) {
                state.add(&info.domain, &info.id, now, second);
            }
        }
        for rule in super::DIRECT_RULES {
            if let Some(now) = Totals::of_direct(counters, rule) {
                state.add(&direct_domain(), &Arc::from(rule), now, second);
            }
        }
        state.rings.retain(|ring| ring.live_at(second));
        if state
            .other
            .as_ref()
            .is_some_and(|ring| !ring.live_at(second))
        {
            state.other = None;
        }
        let rule_count = rules.rules().len();
        if state.last.len() > rule_count.saturating_mul(2).saturating_add(1024) {
            let in_force: HashSet<&str> = rules
                .rules()
                .iter()
                .map(|r| &*r.id)
                .chain(super::DIRECT_RULES)
                .collect();
            state.last.retain(|id, _| in_force.contains(&**id));
        }
    }

    /// The last `seconds` (at most [`HISTORY_SECONDS`]) up to the last sample's second.
    pub fn view(&self, seconds: usize) -> HistoryView {
        let seconds = seconds.clamp(1, HISTORY_SECONDS);
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let end = state.second;
        let series = state
            .rings
            .iter()
            .chain(state.other.as_ref())
            .map(|ring| ring.view(end, seconds))
            .collect();
        HistoryView {
            end_unix_s: end,
            seconds,
            series,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::metrics::Metrics;

    // The slots of a rule's counters, in the order of the outcomes they count.
    const ALLOWED: usize = 0;
    const NEAR_LIMIT: usize = 1;
    const DENIED: usize = 2;
    const SHADOW_DENIED: usize = 3;

    /// One decision of `rule` with the outcome of `slot`, as the decide path counts it.
    fn count(counters: &RuleCounters, rule: &str, slot: usize) {
        counters.by_rule.get(rule).unwrap()[slot].inc();
    }

    const T0: u64 = 1_700_000_000 * NS_PER_S;

    fn rules(n: usize) -> RuleSet {
        let mut yaml = String::from("domain: d\ndescriptors:\n");
        for i in 0..n {
            yaml.push_str(&format!(
                "  - key: k{i}\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n"
            ));
        }
        RuleSet::parse("test", &yaml).unwrap()
    }

    fn series<'a>(view: &'a HistoryView, rule: &str) -> &'a SeriesView {
        view.series.iter().find(|s| s.rule == rule).unwrap()
    }

    #[test]
    fn counts_land_in_the_second_they_were_sampled_in() {
        let metrics = Metrics::new("memory");
        let rules = rules(2);
        let counters = metrics.rule_counters(&rules);
        let history = History::new();
        history.sample(&rules, &counters, T0);
        assert!(history.view(10).series.is_empty(), "no decision, no ring");

        count(&counters, "d.k0", ALLOWED);
        count(&counters, "d.k0", NEAR_LIMIT);
        count(&counters, "d.k0", DENIED);
        history.sample(&rules, &counters, T0 + NS_PER_S / 2);
        count(&counters, "d.k0", SHADOW_DENIED);
        history.sample(&rules, &counters, T0 + NS_PER_S);
        count(&counters, "d.k0", DENIED);
        history.sample(&rules, &counters, T0 + 3 * NS_PER_S);

        let view = history.view(4);
        assert_eq!(view.end_unix_s, T0 / NS_PER_S + 2);
        assert_eq!(view.series.len(), 1);
        let k0 = series(&view, "d.k0");
        assert_eq!(k0.domain, "d");
        assert_eq!(k0.allowed, [0, 2, 0, 0]);
        assert_eq!(k0.denied, [0, 1, 0, 1]);
        assert_eq!(k0.shadow_denied, [0, 1, 0, 0]);
    }

    #[test]
    fn a_ring_leaves_with_its_last_decision_and_old_seconds_read_as_zero() {
        let metrics = Metrics::new("memory");
        let rules = rules(1);
        let counters = metrics.rule_counters(&rules);
        let history = History::new();
        count(&counters, "d.k0", DENIED);
        history.sample(&rules, &counters, T0 + 1);
        let later = T0 + 1 + (HISTORY_SECONDS as u64 - 1) * NS_PER_S;
        history.sample(&rules, &counters, later);
        let view = history.view(HISTORY_SECONDS);
        assert_eq!(series(&view, "d.k0").denied.first(), Some(&1));
        assert_eq!(series(&view, "d.k0").denied.iter().sum::<u32>(), 1);
        history.sample(&rules, &counters, later + NS_PER_S);
        assert!(history.view(HISTORY_SECONDS).series.is_empty());
    }

    #[test]
    fn memory_is_bounded_whatever_the_rules() {
        let metrics = Metrics::new("memory");
        let rules = rules(MAX_SERIES + 10);
        let counters = metrics.rule_counters(&rules);
        let history = History::new();
        for i in 0..MAX_SERIES + 10 {
            count(&counters, &format!("d.k{i}"), DENIED);
        }
        history.sample(&rules, &counters, T0 + 1);
        let view = history.view(1);
        assert_eq!(view.series.len(), MAX_SERIES + 1);
        assert_eq!(series(&view, OTHER_RULES).denied, [10]);
        assert_eq!(view.series.iter().map(|s| s.denied[0]).sum::<u32>(), 74);
    }

    #[test]
    fn counters_shared_across_snapshots_are_not_counted_twice() {
        let metrics = Metrics::new("memory");
        let rules = rules(1);
        let first = metrics.rule_counters(&rules);
        let history = History::new();
        count(&first, "d.k0", DENIED);
        history.sample(&rules, &first, T0 + 1);
        // A reload builds new counters over the same metric series.
        let second = metrics.rule_counters(&rules);
        count(&second, "d.k0", DENIED);
        history.sample(&rules, &second, T0 + 1);
        assert_eq!(series(&history.view(1), "d.k0").denied, [2]);
    }
}
