//! The conformance suite every [`Store`] must pass, under a manual clock (the process clock
//! passed in as `now_ns`). Each case uses its own keys, so one store serves every case.
//!
//! - [`model_agreement`]: random sequences of every operation on every algorithm (with and
//!   without lockout); each outcome must equal the [`Model`]'s, field by field.
//! - [`warm_up`]: the same on GCRA and token buckets with warm-up only, so that their
//!   ramps, idle keys and surcharges are well covered on every store.
//! - [`invariants`](fn@invariants): random traffic; the store's own answers must keep the
//!   algorithm's promise, and every `retry_after` must be exact.
//! - [`leases`]: concurrency leases against an independent oracle.
//! - [`check_all_atomic`]: several limits at once are all-or-nothing.
//!
//! A failure panics with the seed, the case, the rule and the step.

use std::collections::HashMap;
use std::time::Duration;

use proptest::strategy::{Just, Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use weir_core::{Decision, Key, Op, Outcome, Rule, ScopedKey, ScopedLimits, Store};

use crate::invariants::{self, Checked};
use crate::strategy::{self, Action};
use crate::{Model, T0_NS};

/// How much of the suite to run.
#[derive(Debug, Clone, Copy)]
pub struct Suite {
    /// Random scenarios per case.
    pub cases: u32,
    /// The seed; the same seed replays the same scenarios.
    pub seed: u64,
    /// A prefix for every key, so several runs can share a store.
    pub prefix: &'static str,
}

impl Default for Suite {
    fn default() -> Self {
        Self {
            cases: 300,
            seed: 0x5745_4952,
            prefix: "conformance",
        }
    }
}

/// Runs the whole suite with default settings.
pub async fn run_all<S: Store>(store: &S) {
    run(store, Suite::default()).await;
}

/// Runs the whole suite.
pub async fn run<S: Store>(store: &S, suite: Suite) {
    model_agreement(store, suite).await;
    warm_up(store, suite).await;
    invariants(store, suite).await;
    leases(store, suite).await;
    check_all_atomic(store, suite).await;
    scoped_records(store, suite).await;
}

fn runner(seed: u64) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

fn sample<T: std::fmt::Debug>(runner: &mut TestRunner, s: &impl Strategy<Value = T>) -> T {
    s.new_tree(runner).expect("strategy").current()
}

/// A case's key `k`. Key 0 is 8 bytes (a `Key::from(u64)`, unique per suite, case and
/// run), the shape the memory store's lock-free path holds; the others are text. With a
/// hash-tagged prefix (a Redis Cluster's `check_all` needs one slot) every key is text.
fn key(suite: &Suite, case: &str, n: u32, k: u8) -> Key {
    let name = format!("{}:{case}:{n}:{k}", suite.prefix);
    if k == 0 && !suite.prefix.contains('{') {
        let fnv = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        return Key::from(fnv);
    }
    Key::new(name).unwrap()
}

fn holder(h: u8) -> String {
    format!("holder-{h}")
}

fn op<'a>(action: &Action, holders: &'a [String]) -> Option<(u8, Op<'a>)> {
    Some(match *action {
        Action::Advance(_) => return None,
        Action::Check { key, cost } => (key, Op::Check { cost }),
        Action::Penalty { key, n } => (key, Op::Penalty { n }),
        Action::Reward { key, n } => (key, Op::Reward { n }),
        Action::Block { key, ns } => (key, Op::Block { duration_ns: ns }),
        Action::Unblock { key } => (key, Op::Unblock),
        Action::Reset { key } => (key, Op::Reset),
        Action::Inspect { key } => (key, Op::Inspect),
        Action::Acquire {
            key,
            holder,
            ttl_ns,
        } => (
            key,
            Op::Acquire {
                holder: &holders[usize::from(holder)],
                ttl_ns,
            },
        ),
        Action::Release { key, holder } => (
            key,
            Op::Release {
                holder: &holders[usize::from(holder)],
            },
        ),
    })
}

/// Random sequences of every operation: the store must answer exactly as the model does.
pub async fn model_agreement<S: Store>(store: &S, suite: Suite) {
    agree(store, suite, "agree", suite.cases, &strategy::scenario()).await;
}

/// [`model_agreement`] on warm-up rules (a third of the cases, another seed).
pub async fn warm_up<S: Store>(store: &S, suite: Suite) {
    let suite = Suite {
        seed: suite.seed ^ 0x3,
        ..suite
    };
    let cases = suite.cases.div_ceil(3);
    agree(store, suite, "warm", cases, &strategy::warm_scenario()).await;
}

async fn agree<S: Store>(
    store: &S,
    suite: Suite,
    name: &str,
    cases: u32,
    scenarios: &impl Strategy<Value = (Rule, Vec<Action>)>,
) {
    let mut runner = runner(suite.seed);
    let holders: Vec<String> = (0..5).map(holder).collect();
    for case in 0..cases {
        let (rule, actions) = sample(&mut runner, scenarios);
        let mut model = Model::new();
        let mut now = T0_NS + u64::from(case) * 7_919;
        for (step, action) in actions.iter().enumerate() {
            if let Action::Advance(ns) = action {
                now += ns;
                continue;
            }
            let Some((k, op)) = op(action, &holders) else {
                continue;
            };
            let key = key(&suite, name, case, k);
            let got = store.apply(ScopedKey::plain(&key), &rule, op, now).await;
            let want = model.apply(&key, &rule, op, now);
            assert_eq!(
                got, want,
                "seed {:#x} {name} case {case} step {step}: {action:?} on {rule:?} at {now}\n\
                 actions: {actions:?}",
                suite.seed
            );
        }
    }
}

async fn checked<S: Store>(store: &S, key: &Key, rule: &Rule, cost: u64, now: u64) -> Decision {
    match store
        .apply(ScopedKey::plain(key), rule, Op::Check { cost }, now)
        .await
    {
        Ok(Outcome::Decision(d)) => d,
        other => panic!("check of {key:?} on {rule:?} at {now}: {other:?}"),
    }
}

/// Random traffic: the store's answers keep the algorithm's promise, and each denial's
/// `retry_after` is exact (the same request is denied 1 ns before it and allowed at it).
pub async fn invariants<S: Store>(store: &S, suite: Suite) {
    let mut runner = runner(suite.seed ^ 0x1);
    for case in 0..suite.cases {
        let (rule, actions) = sample(&mut runner, &strategy::traffic_scenario());
        let mut model = Model::new();
        let mut traces: HashMap<u8, Vec<Checked>> = HashMap::new();
        let mut now = T0_NS + u64::from(case) * 104_729;
        for action in &actions {
            match *action {
                Action::Advance(ns) => now += ns,
                Action::Check { key: k, cost } => {
                    let key = key(&suite, "inv", case, k);
                    let d = checked(store, &key, &rule, cost, now).await;
                    let want = model.apply(&key, &rule, Op::Check { cost }, now);
                    assert_eq!(Ok(Outcome::Decision(d)), want, "case {case} on {rule:?}");
                    if !d.allowed {
                        retry_is_exact(&model, &key, &rule, cost, now, d.retry_after);
                    }
                    traces.entry(k).or_default().push(Checked {
                        at_ns: now,
                        cost,
                        decision: d,
                    });
                }
                _ => {}
            }
        }
        for (k, trace) in &traces {
            if let Err(broken) = invariants::check(&rule, trace) {
                panic!(
                    "seed {:#x} case {case} key {k}: {broken}\nrule {rule:?}\ntrace {trace:?}",
                    suite.seed
                );
            }
        }
    }
}

fn retry_is_exact(model: &Model, key: &Key, rule: &Rule, cost: u64, now: u64, retry: Duration) {
    let retry_ns = u64::try_from(retry.as_nanos()).unwrap();
    assert!(retry_ns > 0, "a denial with retry_after 0 on {rule:?}");
    let mut before = model.clone();
    let d = before.apply(key, rule, Op::Check { cost }, now + retry_ns - 1);
    assert!(
        matches!(d, Ok(Outcome::Decision(Decision { allowed: false, .. }))),
        "allowed 1 ns before retry_after ({retry:?}) on {rule:?} at {now}: {d:?}"
    );
    let mut at = model.clone();
    let d = at.apply(key, rule, Op::Check { cost }, now + retry_ns);
    assert!(
        matches!(d, Ok(Outcome::Decision(Decision { allowed: true, .. }))),
        "denied at retry_after ({retry:?}) on {rule:?} at {now}: {d:?}"
    );
}

/// Concurrency leases against an independent oracle: never more than `N` live leases,
/// re-entrant holders, expiry frees slots.
pub async fn leases<S: Store>(store: &S, suite: Suite) {
    let mut runner = runner(suite.seed ^ 0x2);
    let holders: Vec<String> = (0..5).map(holder).collect();
    let ops = (1u64..=3).prop_flat_map(|n| {
        let rule = Rule::concurrency(n).unwrap();
        (Just(rule), strategy::operations(&rule, 60))
    });
    for case in 0..suite.cases {
        let (rule, actions) = sample(&mut runner, &ops);
        let max = rule.limit();
        // (key, holder) -> (holds, expires_ns)
        let mut oracle: HashMap<(u8, u8), (u32, u64)> = HashMap::new();
        let mut now = T0_NS;
        for action in &actions {
            oracle.retain(|_, (_, exp)| *exp > now);
            match *action {
                Action::Advance(ns) => now += ns,
                Action::Acquire {
                    key: k,
                    holder: h,
                    ttl_ns,
                } if ttl_ns > 0 => {
                    let key = key(&suite, "lease", case, k);
                    let op = Op::Acquire {
                        holder: &holders[usize::from(h)],
                        ttl_ns,
                    };
                    let got = store.apply(ScopedKey::plain(&key), &rule, op, now).await;
                    let live = oracle.keys().filter(|(kk, _)| *kk == k).count();
                    let expect = oracle.contains_key(&(k, h)) || (live as u64) < max;
                    let Ok(Outcome::Decision(d)) = got else {
                        panic!("acquire: {got:?}")
                    };
                    assert_eq!(d.allowed, expect, "case {case}: {action:?} at {now}");
                    if expect {
                        let e = oracle.entry((k, h)).or_insert((0, 0));
                        e.0 += 1;
                        e.1 = e.1.max(now + ttl_ns);
                    }
                }
                Action::Release { key: k, holder: h } => {
                    let key = key(&suite, "lease", case, k);
                    let op = Op::Release {
                        holder: &holders[usize::from(h)],
                    };
                    let got = store.apply(ScopedKey::plain(&key), &rule, op, now).await;
                    let held = oracle.contains_key(&(k, h));
                    assert_eq!(got, Ok(Outcome::Released(held)), "case {case} at {now}");
                    if let Some(e) = oracle.get_mut(&(k, h)) {
                        e.0 -= 1;
                        if e.0 == 0 {
                            oracle.remove(&(k, h));
                        }
                    }
                }
                _ => {}
            }
            for k in 0..strategy::KEYS {
                let key = key(&suite, "lease", case, k);
                let Ok(Outcome::Usage(u)) = store
                    .apply(ScopedKey::plain(&key), &rule, Op::Inspect, now)
                    .await
                else {
                    panic!("inspect failed")
                };
                assert!(u.used <= max, "{} live leases > {max}", u.used);
            }
        }
    }
}

/// Several limits at once: nothing is consumed unless all allow, exactly as the model says.
pub async fn check_all_atomic<S: Store>(store: &S, suite: Suite) {
    let mut runner = runner(suite.seed ^ 0x3);
    let pair = (strategy::counting_rule(), strategy::counting_rule());
    for case in 0..suite.cases / 4 {
        let (a, b) = sample(&mut runner, &pair);
        let limits = [
            (key(&suite, "all", case, 0), a),
            (key(&suite, "all", case, 1), b),
        ];
        let mut model = Model::new();
        let mut now = T0_NS;
        let step = strategy::scale_ns(&a).min(strategy::scale_ns(&b)) / 3;
        for i in 0..30u64 {
            let cost = 1 + i % 2;
            let got = store
                .check_all(ScopedLimits::plain(&limits), cost, now)
                .await;
            let want = model.check_all(&limits, cost, now);
            assert_eq!(got, want, "case {case} at {now}: {a:?} + {b:?}");
            now += if i % 3 == 0 { step } else { 0 };
        }
    }
}

/// The scope inside the key argument: a key's own record and its records under two rules
/// ([`ScopedKey::scoped`], what a `Limiter` asks for) are three records, each answering as
/// its own model does, through `apply` and `check_all` alike.
pub async fn scoped_records<S: Store>(store: &S, suite: Suite) {
    let mut runner = runner(suite.seed ^ 0x4);
    let pair = (strategy::counting_rule(), strategy::counting_rule());
    for case in 0..suite.cases / 4 {
        let (a, b) = sample(&mut runner, &pair);
        let (a, b) = (a.named("scoped-a"), b.named("scoped-b"));
        let k = key(&suite, "scoped", case, case.to_le_bytes()[0] % 2);
        let (mut plain, mut under_a, mut under_b) = (Model::new(), Model::new(), Model::new());
        let mut now = T0_NS;
        let step = strategy::scale_ns(&a).min(strategy::scale_ns(&b)) / 3;
        for i in 0..30u64 {
            let op = Op::Check { cost: 1 + i % 2 };
            let got = store.apply(ScopedKey::plain(&k), &a, op, now).await;
            assert_eq!(
                got,
                plain.apply(&k, &a, op, now),
                "case {case}: plain, {a:?}"
            );
            let got = store.apply(ScopedKey::scoped(&k), &a, op, now).await;
            assert_eq!(
                got,
                under_a.apply(&k, &a, op, now),
                "case {case}: scoped, {a:?}"
            );
            let limits = [(k.clone(), b)];
            let got = store.check_all(ScopedLimits::scoped(&limits), 1, now).await;
            let want = under_b.check_all(&limits, 1, now);
            assert_eq!(got, want, "case {case}: scoped check_all, {b:?}");
            now += if i % 3 == 0 { step } else { 0 };
        }
    }
}
