//! proptest strategies: rules of every algorithm with small parameters (so limits are hit
//! often; GCRA and token buckets also with warm-up), and random operation sequences whose
//! time steps are scaled to the rule.

use std::time::Duration;

use proptest::prelude::*;
use weir_core::{Algorithm, Lockout, Rule};

/// One step of a generated scenario.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Move the clock forward.
    Advance(u64),
    /// Check `cost` on key number `key` (0 = peek; may exceed capacity on purpose).
    Check {
        /// Key index.
        key: u8,
        /// Cost.
        cost: u64,
    },
    /// Penalty of `n`.
    Penalty {
        /// Key index.
        key: u8,
        /// Units.
        n: u64,
    },
    /// Reward of `n`.
    Reward {
        /// Key index.
        key: u8,
        /// Units.
        n: u64,
    },
    /// Block for `ns`.
    Block {
        /// Key index.
        key: u8,
        /// Duration in ns.
        ns: u64,
    },
    /// Unblock.
    Unblock {
        /// Key index.
        key: u8,
    },
    /// Reset.
    Reset {
        /// Key index.
        key: u8,
    },
    /// Inspect.
    Inspect {
        /// Key index.
        key: u8,
    },
    /// Acquire a lease for holder number `holder`.
    Acquire {
        /// Key index.
        key: u8,
        /// Holder index.
        holder: u8,
        /// Lease TTL in ns.
        ttl_ns: u64,
    },
    /// Release holder number `holder`.
    Release {
        /// Key index.
        key: u8,
        /// Holder index.
        holder: u8,
    },
}

/// How many distinct keys scenarios use.
pub const KEYS: u8 = 3;

fn windows() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1_000u64),
        Just(60_000),
        Just(1_000_000),
        Just(1_000_000_000)
    ]
}

/// A rule of any algorithm, without lockout.
pub fn any_rule() -> impl Strategy<Value = Rule> {
    prop_oneof![
        counting_rule(),
        (1u64..=4).prop_map(|n| Rule::concurrency(n).unwrap()),
    ]
}

/// A rule of any counting algorithm (everything but concurrency), without lockout.
pub fn counting_rule() -> impl Strategy<Value = Rule> {
    let d = Duration::from_nanos;
    prop_oneof![
        (1u64..=6, windows()).prop_map(move |(l, w)| Rule::fixed_window(l, d(w)).unwrap()),
        (1u64..=6, windows()).prop_map(move |(l, w)| Rule::sliding_log(l, d(w)).unwrap()),
        (
            1u64..=6,
            windows(),
            prop_oneof![Just(2u64), Just(4), Just(10)]
        )
            .prop_map(move |(l, w, k)| Rule::sliding_window(l, d(w), d(w / k)).unwrap()),
        (1u64..=6, windows()).prop_map(move |(l, w)| Rule::weighted_window(l, d(w)).unwrap()),
        (1u64..=6, 1u64..=3, windows(), 0u64..=6).prop_map(move |(c, r, w, i)| {
            Rule::token_bucket(c, r, d(w))
                .unwrap()
                .with_initial_tokens(i.min(c))
                .unwrap()
        }),
        (1u64..=6, 1u64..=3, windows())
            .prop_map(move |(c, r, w)| Rule::leaky_bucket(c, r, d(w)).unwrap()),
        (1u64..=4, windows(), 1u64..=6).prop_map(move |(r, w, b)| Rule::gcra(r, d(w), b).unwrap()),
        warm_rule(),
        (
            1u64..=4,
            windows(),
            1u64..=6,
            prop_oneof![Just(u64::MAX), 0u64..=3]
        )
            .prop_map(move |(r, w, depth, waits)| {
                let max_wait = if waits == u64::MAX {
                    Duration::MAX
                } else {
                    d(w * waits / 2)
                };
                Rule::leaky_queue(r, d(w), depth, max_wait).unwrap()
            }),
    ]
}

/// GCRA or a token bucket with warm-up: a period of half a window to three windows (so
/// keys go idle within a scenario), cold factors 2 to 5.
pub fn warm_rule() -> impl Strategy<Value = Rule> {
    let d = Duration::from_nanos;
    let warm = move |rule: Rule, w: u64, k: u64, c: u64| rule.with_warmup(d(w * k / 2), c).unwrap();
    prop_oneof![
        (1u64..=4, windows(), 1u64..=6, 1u64..=6, 2u64..=5).prop_map(move |(r, w, b, k, c)| warm(
            Rule::gcra(r, d(w), b).unwrap(),
            w,
            k,
            c
        )),
        (
            1u64..=6,
            1u64..=3,
            windows(),
            0u64..=6,
            (1u64..=6, 2u64..=5)
        )
            .prop_map(move |(cap, r, w, i, (k, c))| {
                let rule = Rule::token_bucket(cap, r, d(w))
                    .unwrap()
                    .with_initial_tokens(i.min(cap))
                    .unwrap();
                warm(rule, w, k, c)
            }),
    ]
}

/// A counting rule, sometimes with an escalating lockout.
pub fn rule_with_policies() -> impl Strategy<Value = Rule> {
    (any_rule(), any::<bool>()).prop_map(|(rule, lock)| {
        if lock && !matches!(rule.algorithm(), Algorithm::Concurrency(_)) {
            locked(rule)
        } else {
            rule
        }
    })
}

/// The rule with a lockout of its time scale, escalating to four times it.
fn locked(rule: Rule) -> Rule {
    let base = Duration::from_nanos(scale_ns(&rule));
    rule.with_lockout(Lockout::new(base).unwrap().escalating(base * 4).unwrap())
}

/// The rule's natural time scale ([`Rule::window`]; 1 ms for concurrency).
pub fn scale_ns(rule: &Rule) -> u64 {
    match u64::try_from(rule.window().as_nanos()) {
        Ok(0) | Err(_) => 1_000_000,
        Ok(ns) => ns,
    }
}

/// Time steps scaled to the rule: mostly small, sometimes a whole scale or more, sometimes
/// zero (simultaneous requests).
fn advance(scale: u64) -> impl Strategy<Value = Action> {
    prop_oneof![
        3 => Just(Action::Advance(0)),
        6 => (0..=scale / 3).prop_map(Action::Advance),
        2 => (0..=scale * 2).prop_map(Action::Advance),
        1 => (1u64..=3).prop_map(|k| Action::Advance(1 + k % 2)),
    ]
}

/// Traffic only: checks and time steps, the input of the invariants.
pub fn traffic(rule: &Rule, len: usize) -> impl Strategy<Value = Vec<Action>> {
    let scale = scale_ns(rule).max(3);
    let limit = rule.limit();
    let action = prop_oneof![
        3 => advance(scale),
        5 => (0..KEYS, 1..=limit).prop_map(|(key, cost)| Action::Check { key, cost }),
        1 => (0..KEYS).prop_map(|key| Action::Check { key, cost: 1 }),
    ];
    proptest::collection::vec(action, 1..len)
}

/// Every operation, including invalid ones (cost above capacity, acquire on a meter).
pub fn operations(rule: &Rule, len: usize) -> impl Strategy<Value = Vec<Action>> {
    let scale = scale_ns(rule).max(3);
    let limit = rule.limit();
    let action = prop_oneof![
        4 => advance(scale),
        6 => (0..KEYS, 0..=limit + 1).prop_map(|(key, cost)| Action::Check { key, cost }),
        1 => (0..KEYS, 0..=limit + 1).prop_map(|(key, n)| Action::Penalty { key, n }),
        1 => (0..KEYS, 0..=limit + 1).prop_map(|(key, n)| Action::Reward { key, n }),
        1 => (0..KEYS, 0..=scale).prop_map(|(key, ns)| Action::Block { key, ns }),
        1 => (0..KEYS).prop_map(|key| Action::Unblock { key }),
        1 => (0..KEYS).prop_map(|key| Action::Reset { key }),
        1 => (0..KEYS).prop_map(|key| Action::Inspect { key }),
        3 => (0..KEYS, 0u8..5, 0..=scale)
            .prop_map(|(key, holder, ttl_ns)| Action::Acquire { key, holder, ttl_ns }),
        2 => (0..KEYS, 0u8..5).prop_map(|(key, holder)| Action::Release { key, holder }),
    ];
    proptest::collection::vec(action, 1..len)
}

/// A rule and a sequence of every operation.
pub fn scenario() -> impl Strategy<Value = (Rule, Vec<Action>)> {
    rule_with_policies().prop_flat_map(|rule| (Just(rule), operations(&rule, 60)))
}

/// A warm-up rule, sometimes with an escalating lockout, and a sequence of every operation.
pub fn warm_scenario() -> impl Strategy<Value = (Rule, Vec<Action>)> {
    (warm_rule(), any::<bool>())
        .prop_map(|(rule, lock)| if lock { locked(rule) } else { rule })
        .prop_flat_map(|rule| (Just(rule), operations(&rule, 80)))
}

/// A counting rule without policies and a traffic sequence.
pub fn traffic_scenario() -> impl Strategy<Value = (Rule, Vec<Action>)> {
    counting_rule().prop_flat_map(|rule| (Just(rule), traffic(&rule, 80)))
}
