//! What goes into `ARGV`: a rule as one field, an operation as three, `now` as whole
//! seconds and nanoseconds. Also the store-level checks that keep every number the Lua
//! side computes exact (below 2^53): a rule or operation beyond [`MAX_SPAN`] is refused
//! here with [`CheckError::Invalid`], before any round trip. Validation of the operation
//! itself is the pure step's, run on a scratch record, so errors equal the model's.

use std::time::Duration;

use weir_core::step;
use weir_core::time::SECOND_NS;
use weir_core::{Algorithm, CheckError, Guard, Op, Record, Rule, State};

use crate::scripts::Tag;

/// The longest span (and the largest count) a rule or an operation may express in the
/// Redis store: 2^51 ns, about 26 days. See the crate docs, "Time encoding".
pub const MAX_SPAN: Duration = Duration::from_nanos(MAX_SPAN_NS);

pub(crate) const MAX_SPAN_NS: u64 = 1 << 51;

const BEYOND: &str = "is beyond the Redis store's horizon of 2^51 ns (about 26 days) or 2^51 units";

/// A rule as `ARGV`: its algorithm's tag, three parameters, the lockout and the warm-up.
#[derive(Debug, Clone)]
pub(crate) struct RuleArgs {
    pub(crate) tag: Tag,
    pub(crate) params: [Option<u64>; 3],
    pub(crate) lockout: Option<[u64; 3]>,
    /// The warm-up's period, cold factor and ramp (ns, factor, ns).
    pub(crate) warmup: Option<[u64; 3]>,
}

impl RuleArgs {
    /// The one field `rule` (lua/base.lua) reads: the tag and the three parameters, `-`
    /// for none, then the lockout's three when there is one, separated by spaces:
    /// `gc 10 100000000 1000000000`; then, for a warm-up, `~` and its three:
    /// `gw 10 100000000 1000000000 ~30000000000 3 15000000000`. The same rule is always the same text, so scripts
    /// and batches can tell rules apart by it.
    pub(crate) fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut out = String::with_capacity(48);
        out.push_str(self.tag.as_str());
        for p in self.params {
            match p {
                Some(v) => {
                    let _ = write!(out, " {v}");
                }
                None => out.push_str(" -"),
            }
        }
        if let Some(lockout) = self.lockout {
            for v in lockout {
                let _ = write!(out, " {v}");
            }
        }
        if let Some([period, cold, ramp]) = self.warmup {
            let _ = write!(out, " ~{period} {cold} {ramp}");
        }
        out
    }

    /// Appends the rule's field.
    pub(crate) fn write(&self, out: &mut Args) {
        out.0.push(self.text().into_bytes());
    }
}

/// Script arguments being built (`ARGV`), each one byte string.
#[derive(Debug, Clone, Default)]
pub(crate) struct Args(pub(crate) Vec<Vec<u8>>);

impl Args {
    pub(crate) fn text(&mut self, s: &str) {
        self.0.push(s.as_bytes().to_vec());
    }

    pub(crate) fn num(&mut self, n: u64) {
        self.0.push(n.to_string().into_bytes());
    }

    /// `now` as whole seconds and nanoseconds, or two empty fields for the store clock.
    pub(crate) fn now(&mut self, now_ns: Option<u64>) {
        match now_ns {
            Some(ns) => {
                self.num(ns / SECOND_NS);
                self.num(ns % SECOND_NS);
            }
            None => {
                self.text("");
                self.text("");
            }
        }
    }

    /// Appends every argument to a script call.
    pub(crate) fn apply_to(&self, call: &mut crate::call::Call) {
        for a in &self.0 {
            call.arg(a.as_slice());
        }
    }
}

fn within(param: &'static str, value: u64) -> Result<u64, CheckError> {
    if value > MAX_SPAN_NS {
        Err(CheckError::Invalid {
            param,
            reason: BEYOND,
        })
    } else {
        Ok(value)
    }
}

fn ns(d: Duration) -> u64 {
    weir_core::time::duration_ns(d)
}

/// Encodes a rule, refusing one the Lua side cannot represent exactly.
pub(crate) fn rule_args(rule: &Rule) -> Result<RuleArgs, CheckError> {
    let algorithm = rule.algorithm();
    let Some(tag) = Tag::of(rule) else {
        return Err(CheckError::Unsupported {
            op: "redis store",
            algorithm: algorithm.name(),
        });
    };
    within("limit", rule.limit())?;
    within("window", ns(rule.window()))?;
    let limit = rule.limit();
    let params = match algorithm {
        Algorithm::FixedWindow(_) | Algorithm::WeightedWindow(_) => {
            [Some(limit), Some(ns(rule.window())), None]
        }
        Algorithm::SlidingLog(s) | Algorithm::SlidingWindow(s) => {
            [Some(limit), Some(ns(rule.window())), Some(s.precision_ns())]
        }
        Algorithm::TokenBucket(tb) => [
            Some(limit),
            Some(tb.interval_ns()),
            Some(initial_tokens(rule)),
        ],
        Algorithm::LeakyBucket(lb) => [Some(limit), Some(lb.interval_ns()), None],
        Algorithm::Gcra(g) => [
            Some(g.burst()),
            Some(g.interval_ns()),
            Some(ns(rule.window())),
        ],
        Algorithm::LeakyQueue(q) => [Some(q.interval_ns()), Some(limit), Some(q.max_wait_ns())],
        _ => [Some(limit), None, None],
    };
    let lockout = match (rule.lockout(), tag) {
        // A lockout never engages on concurrency leases (the step returns before it).
        (Some(_), Tag::Concurrency) | (None, _) => None,
        (Some(_), _) => {
            let [base, max, forgive] = lockout_params(rule);
            within("lockout", max)?;
            within("lockout forgive_after", forgive)?;
            Some([base, max, forgive])
        }
    };
    let warmup = match rule.warmup() {
        Some(w) => Some([
            within("warmup", w.period_ns())?,
            w.cold_factor(),
            w.ramp_ns(),
        ]),
        None => None,
    };
    Ok(RuleArgs {
        tag,
        params,
        lockout,
        warmup,
    })
}

/// A token bucket's initial tokens, as the pure step starts a fresh key with them.
fn initial_tokens(rule: &Rule) -> u64 {
    match State::fresh(rule.algorithm(), 0) {
        State::TokenBucket(s) => s.tokens,
        State::TokenBucketWarm(s) => s.state.tokens,
        _ => rule.limit(),
    }
}

/// A rule's lockout as (base, max, forgive) in ns, read off the pure step: weir-core keeps
/// these fields private, so a scratch key is driven into a lockout, once fresh and once
/// at the highest escalation level.
fn lockout_params(rule: &Rule) -> [u64; 3] {
    let now = 1;
    let locked = |strikes: Option<u32>| -> Guard {
        let mut record = Record::fresh(rule, now);
        let over = rule.limit().saturating_add(1);
        let _ = step::apply(rule, &mut record, &Op::Penalty { n: over }, now);
        if let Some(strikes) = strikes {
            record.guard = Some(Box::new(Guard {
                blocked_until_ns: 0,
                strikes,
                strikes_expire_ns: u64::MAX,
            }));
        }
        let _ = step::apply(rule, &mut record, &Op::Check { cost: 1 }, now);
        record.guard.as_deref().copied().unwrap_or_default()
    };
    let first = locked(None);
    let last = locked(Some(63));
    [
        first.blocked_until_ns.saturating_sub(now),
        last.blocked_until_ns.saturating_sub(now),
        first
            .strikes_expire_ns
            .saturating_sub(first.blocked_until_ns),
    ]
}

/// The operation block `S.one` reads (operation, number, holder, then the rule), after
/// the pure step's own validation and the store's horizon.
pub(crate) fn op_block(rule: &Rule, op: &Op<'_>, now_ns: u64) -> Result<(Tag, Args), CheckError> {
    validate(rule, op, now_ns)?;
    let (code, n, holder) = match *op {
        Op::Check { cost } => ("c", cost, ""),
        Op::Penalty { n } => ("p", n, ""),
        Op::Reward { n } => ("w", n, ""),
        Op::Block { duration_ns } => ("b", within("duration", duration_ns)?, ""),
        Op::Unblock => ("u", 0, ""),
        Op::Reset => ("r", 0, ""),
        Op::Inspect => ("i", 0, ""),
        Op::Acquire { holder, ttl_ns } => ("a", within("ttl", ttl_ns)?, holder),
        Op::Release { holder } => ("l", 0, holder),
        _ => {
            return Err(CheckError::Unsupported {
                op: op.name(),
                algorithm: rule.algorithm().name(),
            })
        }
    };
    let rule_args = rule_args(rule)?;
    let mut out = Args::default();
    out.text(code);
    out.num(n);
    out.text(holder);
    rule_args.write(&mut out);
    Ok((rule_args.tag, out))
}

/// The pure step's validation, exactly: `step::apply` validates before anything else and
/// fails only then, so a scratch record tells.
pub(crate) fn validate(rule: &Rule, op: &Op<'_>, now_ns: u64) -> Result<(), CheckError> {
    let mut scratch = Record::fresh(rule, now_ns);
    step::apply(rule, &mut scratch, op, now_ns).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lockout_parameters_are_read_off_the_step() {
        let lockout = weir_core::Lockout::new(Duration::from_secs(5))
            .unwrap()
            .escalating(Duration::from_secs(60))
            .unwrap()
            .forgive_after(Duration::from_secs(600));
        let rule = Rule::gcra(1, Duration::from_secs(1), 2)
            .unwrap()
            .with_lockout(lockout);
        assert_eq!(
            lockout_params(&rule),
            [5 * SECOND_NS, 60 * SECOND_NS, 600 * SECOND_NS]
        );
    }

    #[test]
    fn initial_tokens_are_read_off_a_fresh_state() {
        let rule = Rule::token_bucket(10, 1, Duration::from_secs(1))
            .unwrap()
            .with_initial_tokens(3)
            .unwrap();
        assert_eq!(
            rule_args(&rule).unwrap().params,
            [Some(10), Some(1_000_000_000), Some(3)]
        );
        assert_eq!(rule_args(&rule).unwrap().text(), "tb 10 1000000000 3");
    }

    #[test]
    fn a_rule_is_one_field_with_its_lockout_last() {
        let lockout = weir_core::Lockout::new(Duration::from_secs(5)).unwrap();
        let rule = Rule::fixed_window(3, Duration::from_secs(60))
            .unwrap()
            .with_lockout(lockout);
        let text = rule_args(&rule).unwrap().text();
        assert!(text.starts_with("fw 3 60000000000 - 5000000000 "), "{text}");
        assert_eq!(text.split(' ').count(), 7);
    }

    #[test]
    fn a_warm_bucket_keeps_its_initial_tokens() {
        let rule = Rule::token_bucket(10, 1, Duration::from_secs(1))
            .unwrap()
            .with_initial_tokens(3)
            .unwrap()
            .with_warmup(Duration::from_secs(4), 3)
            .unwrap();
        assert_eq!(
            rule_args(&rule).unwrap().text(),
            "tw 10 1000000000 3 ~4000000000 3 2000000000"
        );
    }

    #[test]
    fn a_warm_up_follows_the_lockout() {
        let lockout = weir_core::Lockout::new(Duration::from_secs(5)).unwrap();
        let rule = Rule::gcra(10, Duration::from_secs(1), 10)
            .unwrap()
            .with_warmup(Duration::from_secs(30), 3)
            .unwrap()
            .with_lockout(lockout);
        let text = rule_args(&rule).unwrap().text();
        assert!(
            text.starts_with("gw 10 100000000 1000000000 5000000000 "),
            "{text}"
        );
        assert!(text.ends_with(" ~30000000000 3 15000000000"), "{text}");
    }

    #[test]
    fn spans_beyond_the_horizon_are_refused() {
        let month = Rule::fixed_window(10, Duration::from_secs(31 * 86_400)).unwrap();
        assert_eq!(
            rule_args(&month).unwrap_err().to_string(),
            "window is beyond the Redis store's horizon of 2^51 ns (about 26 days) or 2^51 units"
        );
        let day = Rule::fixed_window(10, Duration::from_secs(86_400)).unwrap();
        assert!(rule_args(&day).is_ok());
    }
}
