//! What a record read back from a state file may claim ([`clamp`]), applied by
//! [`MemoryStore::import`](super::MemoryStore::import) to every record before the store
//! takes it. Not on the path of a decision: a restart reads the file once, before serving.
//!
//! A state file is written by Weir, but a file is only bytes: whoever could write it (or a
//! clock that jumped) could claim a lockout of 19 years on a rule whose lockout lasts at
//! most an hour. So nothing in it is believed beyond what the rule in force could have
//! produced, counted from the restart's `now` (the file's own instant is not trusted):
//!
//! - **A lockout** (the guard a lockout leaves: strikes, and strikes forgotten exactly the
//!   rule's `forgive_after` after the block ends) lasts at most the rule's lockout `max`.
//! - **Any other block** (an operator's) lasts at most `max_block`, the admin API's
//!   documented maximum (`weir_engine::MAX_BLOCK`), or the rule's lockout `max` if that is
//!   longer (a lockout saved under another `forgive_after` looks like an operator's block
//!   and must not be cut short); strikes are forgotten at most the rule's lockout `max`
//!   plus `forgive_after` from now.
//! - **The algorithm's state** holds the key limited for at most twice as long as the
//!   rule's fullest state does (the limit used up now; under a warm-up, times the cold
//!   factor, plus the warm-up period); beyond that it is replaced by that full state, so
//!   the key stays limited, for as long as the rule allows.
//!
//! A clamp never lifts anything: a block clamped is still a block, a state clamped is
//! still full. Concurrency leases are not clamped here (their expiries are bounded by the
//! import's horizon).

use crate::rule::Rule;
use crate::state::Record;
use crate::step::{apply, expiry, Op};

/// Clamps `record` to what `rule` allows at `now_ns` (see the module header), with blocks
/// that are not lockouts bounded by `max_block_ns`. Returns what was clamped, if anything,
/// for the import's report.
pub(crate) fn clamp(
    rule: &Rule,
    record: &mut Record,
    now_ns: u64,
    max_block_ns: u64,
) -> Option<&'static str> {
    let guard = clamp_guard(rule, record, now_ns, max_block_ns);
    let state = clamp_state(rule, record, now_ns);
    // Never kept longer than what it now holds (a forged expiry would pin the record).
    record.expires_ns = record.expires_ns.min(expiry(rule, record));
    guard.or(state)
}

fn clamp_guard(
    rule: &Rule,
    record: &mut Record,
    now_ns: u64,
    max_block_ns: u64,
) -> Option<&'static str> {
    let g = record.guard.as_deref_mut()?;
    let mut clamped = None;
    match rule.lockout {
        Some(lockout)
            if g.strikes > 0
                && g.strikes_expire_ns == g.blocked_until_ns.saturating_add(lockout.forgive_ns) =>
        {
            let latest = now_ns.saturating_add(lockout.max_ns);
            if g.blocked_until_ns > latest {
                g.blocked_until_ns = latest;
                g.strikes_expire_ns = latest.saturating_add(lockout.forgive_ns);
                clamped = Some("a lockout longer than the rule's lockout max");
            }
        }
        lockout => {
            // Not lockout-shaped: an operator's block, or a lockout saved under another
            // `forgive_after`; either may last the longer of the two maximums.
            let longest = lockout.map_or(max_block_ns, |l| l.max_ns.max(max_block_ns));
            let latest = now_ns.saturating_add(longest);
            if g.blocked_until_ns > latest {
                g.blocked_until_ns = latest;
                clamped = Some("a block longer than the admin API's maximum");
            }
            let strikes_latest = lockout.map_or(0, |l| {
                now_ns.saturating_add(l.max_ns).saturating_add(l.forgive_ns)
            });
            if g.strikes_expire_ns > strikes_latest {
                g.strikes_expire_ns = strikes_latest;
                clamped = clamped.or(Some("lockout strikes kept longer than the rule's"));
            }
        }
    }
    clamped
}

fn clamp_state(rule: &Rule, record: &mut Record, now_ns: u64) -> Option<&'static str> {
    let mut full = Record::fresh(rule, now_ns);
    // Concurrency leases have no penalty: not clamped here.
    apply(rule, &mut full, &Op::Penalty { n: rule.limit() }, now_ns).ok()?;
    let span = expiry(rule, &full).saturating_sub(now_ns);
    // A cold key is paced `cold_factor` times slower, and is warm until a period after.
    let (cold, period) = rule
        .warmup()
        .map_or((1, 0), |w| (w.cold_factor, w.period_ns));
    let latest = now_ns
        .saturating_add(span.saturating_mul(2).saturating_mul(cold))
        .saturating_add(period);
    let guard = record.guard.take();
    let state_at = expiry(rule, record);
    record.guard = guard;
    if state_at <= latest || !record.state.belongs_to(&rule.algorithm) {
        return None;
    }
    record.state = full.state;
    Some("a state holding the key limited longer than its rule can")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Guard, State};
    use crate::{Lockout, Rule};
    use std::time::Duration;

    const NOW: u64 = 1_700_000_000_000_000_000;
    const HOUR: u64 = 3_600_000_000_000;
    const YEAR: u64 = 365 * 24 * HOUR;

    fn login() -> Rule {
        let lockout = Lockout::new(Duration::from_secs(60))
            .unwrap()
            .escalating(Duration::from_secs(3600))
            .unwrap();
        Rule::sliding_log(5, Duration::from_secs(60))
            .unwrap()
            .with_lockout(lockout)
    }

    fn guarded(rule: &Rule, guard: Guard) -> Record {
        let mut record = Record::fresh(rule, NOW);
        record.expires_ns = guard.blocked_until_ns.max(guard.strikes_expire_ns);
        record.guard = Some(Box::new(guard));
        record
    }

    #[test]
    fn a_lockout_is_clamped_to_the_rules_max_and_a_block_to_max_block() {
        let rule = login();
        let forgive = 24 * HOUR;
        let until = NOW + 19 * YEAR;
        let mut lockout = guarded(
            &rule,
            Guard {
                blocked_until_ns: until,
                strikes: 3,
                strikes_expire_ns: until + forgive,
            },
        );
        assert!(clamp(&rule, &mut lockout, NOW, 30 * 24 * HOUR).is_some());
        let g = lockout.guard.as_deref().unwrap();
        assert_eq!(g.blocked_until_ns, NOW + HOUR);
        assert_eq!(g.strikes_expire_ns, NOW + HOUR + forgive);
        assert_eq!(lockout.expires_ns, NOW + HOUR + forgive);

        let mut block = guarded(
            &rule,
            Guard {
                blocked_until_ns: u64::MAX,
                strikes: 0,
                strikes_expire_ns: 0,
            },
        );
        assert!(clamp(&rule, &mut block, NOW, 30 * 24 * HOUR).is_some());
        assert_eq!(
            block.guard.as_deref().unwrap().blocked_until_ns,
            NOW + 30 * 24 * HOUR
        );
        assert_eq!(block.expires_ns, NOW + 30 * 24 * HOUR);
    }

    #[test]
    fn what_the_rule_allows_is_kept_as_it_is() {
        let rule = login();
        let mut record = Record::fresh(&rule, NOW);
        for _ in 0..7 {
            apply(&rule, &mut record, &Op::Check { cost: 1 }, NOW).unwrap();
        }
        apply(
            &rule,
            &mut record,
            &Op::Block {
                duration_ns: 2 * HOUR,
            },
            NOW,
        )
        .unwrap();
        let before = record.clone();
        assert_eq!(clamp(&rule, &mut record, NOW + 1, 30 * 24 * HOUR), None);
        assert_eq!(record, before);
    }

    /// A lockout of 50 days saved under another `forgive_after` is not lockout-shaped;
    /// under a rule whose lockout max is 60 days it must not be cut to `max_block`.
    #[test]
    fn a_long_lockout_that_looks_like_a_block_keeps_the_rules_max() {
        let day = 24 * HOUR;
        let lockout = Lockout::new(Duration::from_secs(3600))
            .unwrap()
            .escalating(Duration::from_secs(60 * 24 * 3600))
            .unwrap();
        let rule = Rule::per_second(1).unwrap().with_lockout(lockout);
        let mut record = guarded(
            &rule,
            Guard {
                blocked_until_ns: NOW + 50 * day,
                strikes: 6,
                strikes_expire_ns: NOW + 51 * day,
            },
        );
        let before = record.clone();
        assert_eq!(clamp(&rule, &mut record, NOW, 30 * day), None);
        assert_eq!(record, before);
    }

    #[test]
    fn a_state_from_the_future_becomes_the_rules_full_state() {
        let rule = Rule::gcra(1, Duration::from_secs(1), 10).unwrap();
        let mut record = Record::fresh(&rule, NOW);
        if let State::Gcra(s) = &mut record.state {
            s.tat_ns = NOW + 19 * YEAR;
        }
        record.expires_ns = NOW + 19 * YEAR;
        assert!(clamp(&rule, &mut record, NOW, HOUR).is_some());
        let State::Gcra(s) = &record.state else {
            panic!("{record:?}")
        };
        assert_eq!(s.tat_ns, NOW + 10_000_000_000);
        assert_eq!(record.expires_ns, NOW + 10_000_000_000);
    }
}
