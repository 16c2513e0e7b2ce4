//! The lease protocol's bounds, under a manual clock: several `LeasedStore` instances over
//! one shared memory store, checked against what the docs of `weir_resilience::LeasedStore`
//! state. Over-admission: units admitted over any interval are covered by store grants over
//! that interval widened by one slice lifetime, and for GCRA by `burst + (t + ttl) / T`.
//! Under-admission: the units idle in slices never exceed `instances × cap`, and a
//! saturated key gets nearly what the exact rule allows, for few store calls.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use weir_core::{
    CheckError, Decision, Decisions, Key, MemoryStore, Op, Outcome, Rule, Store, StoreError,
};
use weir_resilience::{LeaseConfig, LeasedStore};

/// The shared memory store, recording what it granted to one instance: `(at, units)`.
#[derive(Clone)]
struct Recorded {
    store: MemoryStore,
    grants: Grants,
}

impl Store for Recorded {
    async fn apply(
        &self,
        key: weir_core::ScopedKey<'_>,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> Result<Outcome, CheckError> {
        let outcome = self.store.apply(key, rule, op, now_ns).await?;
        if let (Op::Check { cost }, Outcome::Decision(d)) = (op, &outcome) {
            if d.allowed && cost > 0 {
                self.grants.lock().unwrap().push((now_ns, cost));
            }
        }
        Ok(outcome)
    }

    async fn check_all(
        &self,
        _limits: weir_core::ScopedLimits<'_>,
        _cost: u64,
        _now_ns: u64,
    ) -> Result<Decisions, CheckError> {
        Err(CheckError::Store(StoreError::Unavailable(
            "not used by this test".into(),
        )))
    }
}

type Grants = Arc<Mutex<Vec<(u64, u64)>>>;

struct Fleet {
    instances: Vec<LeasedStore<Recorded>>,
    grants: Vec<Grants>,
}

fn fleet(n: usize) -> Fleet {
    let config = LeaseConfig {
        instances: n as u64,
        ..LeaseConfig::default()
    };
    let store = MemoryStore::default();
    let grants: Vec<_> = (0..n).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
    let instances = grants
        .iter()
        .map(|g| {
            let recorded = Recorded {
                store: store.clone(),
                grants: g.clone(),
            };
            LeasedStore::new(recorded, config)
        })
        .collect();
    Fleet { instances, grants }
}

fn check(store: &LeasedStore<Recorded>, key: &Key, rule: &Rule, now_ns: u64) -> Decision {
    let run = store.apply(
        weir_core::ScopedKey::plain(key),
        rule,
        Op::Check { cost: 1 },
        now_ns,
    );
    let outcome = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap()
        .block_on(run)
        .unwrap();
    match outcome {
        Outcome::Decision(d) => d,
        other => panic!("{other:?}"),
    }
}

fn units_in(events: &[(u64, u64)], from: u64, to: u64) -> u64 {
    events
        .iter()
        .filter(|(t, _)| *t >= from && *t <= to)
        .map(|(_, n)| n)
        .sum()
}

fn rules() -> impl Strategy<Value = Rule> {
    prop_oneof![
        (1u64..40, 1u64..40).prop_map(|(rate, burst)| Rule::gcra(
            rate,
            Duration::from_secs(1),
            burst
        )),
        (1u64..40, 1u64..40).prop_map(|(cap, rate)| Rule::token_bucket(
            cap,
            rate,
            Duration::from_secs(1)
        )),
        (1u64..60).prop_map(|limit| Rule::fixed_window(limit, Duration::from_secs(1))),
        (1u64..60).prop_map(|limit| Rule::sliding_window(
            limit,
            Duration::from_secs(1),
            Duration::from_millis(100)
        )),
    ]
    .prop_map(|r| r.unwrap().leased().unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every admitted unit was granted by the store at most one slice lifetime earlier,
    /// and no more sit idle in slices than `instances × cap`.
    #[test]
    fn admissions_are_covered_by_grants_one_lifetime_wide(
        rule in rules(),
        steps in prop::collection::vec((0usize..3, 0u64..40_000_000), 1..300),
    ) {
        let fleet = fleet(3);
        let key = Key::new("k").unwrap();
        let config = LeaseConfig { instances: 3, ..LeaseConfig::default() };
        let ttl = config.ttl_ns(&rule);
        let mut now = 1_000_000_000u64;
        let mut admitted = Vec::new();
        for (who, advance) in steps {
            now += advance;
            if check(&fleet.instances[who], &key, &rule, now).allowed {
                admitted.push((now, 1));
            }
            let held: u64 = fleet.instances.iter().map(|s| s.held_units(now)).sum();
            // An instance holds at most `cap`, or the limit while it is turning the key's
            // checks away (see `LeaseConfig::overload_cap`).
            prop_assert!(held <= 3 * config.overload_cap(&rule, 1), "{held} units idle");
        }
        let grants: Vec<(u64, u64)> =
            fleet.grants.iter().flat_map(|g| g.lock().unwrap().clone()).collect();
        for &(a, _) in &admitted {
            for &(b, _) in admitted.iter().filter(|(b, _)| *b >= a) {
                let spent = units_in(&admitted, a, b);
                let granted = units_in(&grants, a.saturating_sub(ttl), b);
                prop_assert!(
                    spent <= granted,
                    "{spent} admitted in [{a}, {b}] but {granted} granted from one lifetime before"
                );
            }
        }
    }

    /// GCRA end to end: over any interval `t`, at most `burst + (t + ttl) / T + 1`.
    #[test]
    fn gcra_admits_at_most_its_rate_over_the_interval_plus_one_lifetime(
        rate in 1u64..50,
        burst in 1u64..50,
        steps in prop::collection::vec((0usize..3, 0u64..20_000_000), 1..400),
    ) {
        let rule = Rule::gcra(rate, Duration::from_secs(1), burst).unwrap().leased().unwrap();
        let fleet = fleet(3);
        let key = Key::new("k").unwrap();
        let ttl = LeaseConfig::default().ttl_ns(&rule);
        let interval = 1_000_000_000 / rate;
        let mut now = 1_000_000_000u64;
        let mut admitted = Vec::new();
        for (who, advance) in steps {
            now += advance;
            if check(&fleet.instances[who], &key, &rule, now).allowed {
                admitted.push((now, 1));
            }
        }
        for &(a, _) in &admitted {
            for &(b, _) in admitted.iter().filter(|(b, _)| *b >= a) {
                let spent = units_in(&admitted, a, b);
                let bound = burst + (b - a + ttl) / interval + 1;
                prop_assert!(spent <= bound, "{spent} in [{a}, {b}], bound {bound}");
            }
        }
    }
}

/// `n` instances together offered ten times a GCRA limit of `rate`/s for a simulated
/// minute: what they admitted, the decisions, and the store calls.
fn saturate(n: usize, rate: u64) -> (u64, u64, u64) {
    let rule = Rule::gcra(rate, Duration::from_secs(1), rate)
        .unwrap()
        .leased()
        .unwrap();
    let interval = 1_000_000_000 / rate;
    let step = interval / 10; // ten checks per unit of the rate
    let fleet = fleet(n);
    let key = Key::new("hot").unwrap();
    let ttl = LeaseConfig::default().ttl_ns(&rule);
    let start = 1_000_000_000u64;
    let minute = 60_000_000_000u64;
    let (mut admitted, mut decisions) = (0u64, 0u64);
    let mut now = start;
    while now < start + minute {
        for instance in &fleet.instances {
            decisions += 1;
            if check(instance, &key, &rule, now).allowed {
                admitted += 1;
            }
            now += step;
        }
    }
    let exact = rate + minute / interval; // burst + rate × minute
    let bound = rate + (minute + ttl) / interval + 1;
    assert!(admitted <= bound, "admitted {admitted} > {bound}");
    assert!(
        admitted * 100 >= exact * 97,
        "admitted {admitted} of the {exact} the exact rule allows"
    );
    let claims = fleet.instances.iter().map(|s| s.stats().claims).sum();
    // Instances at overload split the limit: none starves (each admits at least a
    // twentieth; the first to claim when units come back wins more often), none takes
    // it all.
    if n > 1 {
        for stats in fleet.instances.iter().map(|s| s.stats()) {
            let share = stats.units_granted * 20;
            assert!(share >= admitted, "{stats:?} of {admitted}");
            assert!(stats.units_granted < admitted, "{stats:?} of {admitted}");
        }
    }
    (admitted, decisions, claims)
}

/// One instance at 10x overload: nearly all the limit, for one store call per slice
/// lifetime, for a small limit as for a large one.
#[test]
fn a_saturated_key_gets_nearly_its_limit_for_few_store_calls() {
    // The floor, since issue 29 (no key goes a lifetime without a unit while the exact
    // rule admits): one claim per lifetime (600 in the simulated minute: 0.1 calls a
    // decision at 10/s, 0.01 at 100/s), plus the first claims while the slices grow.
    for rate in [10, 100] {
        let (_, decisions, claims) = saturate(1, rate);
        assert!(
            claims <= 600 + 30,
            "{rate}/s: {claims} store calls for {decisions} decisions"
        );
    }
}

/// Three instances competing at 10x overload: still nearly all the limit; refused claims
/// (an instance asking while another holds the units) cost at most two calls per
/// instance and lifetime.
#[test]
fn competing_instances_share_a_saturated_key() {
    let (_, decisions, claims) = saturate(3, 100);
    assert!(
        claims <= 3 * (2 * 600 + 30),
        "{claims} store calls for {decisions} decisions"
    );
}

/// A quiet key claims one unit at a time, so a quiet instance holds nothing idle.
#[test]
fn a_quiet_key_claims_only_what_it_spends() {
    let rule = Rule::gcra(100, Duration::from_secs(1), 100)
        .unwrap()
        .leased()
        .unwrap();
    let fleet = fleet(1);
    let key = Key::new("quiet").unwrap();
    let store = &fleet.instances[0];
    let mut now = 1_000_000_000u64;
    for _ in 0..20 {
        assert!(check(store, &key, &rule, now).allowed);
        assert_eq!(store.held_units(now), 0);
        now += 1_000_000_000; // one a second: far below one per lifetime (100 ms)
    }
    assert_eq!(store.stats().claims, 20);
}

/// Exact rules, and operations other than a check, go straight to the store.
#[test]
fn exact_rules_and_other_operations_pass_through() {
    let exact = Rule::gcra(10, Duration::from_secs(1), 10).unwrap();
    let fleet = fleet(1);
    let key = Key::new("k").unwrap();
    let store = &fleet.instances[0];
    for i in 0..12u64 {
        let d = check(store, &key, &exact, 1_000_000_000 + i);
        assert_eq!(d.allowed, i < 10);
    }
    assert_eq!(store.stats().claims, 0);
    assert_eq!(fleet.grants[0].lock().unwrap().len(), 10);
}

/// A reset drops the key's slice: the next check claims afresh from the reset record.
#[test]
fn a_reset_drops_the_slice() {
    let rule = Rule::fixed_window(8, Duration::from_secs(60))
        .unwrap()
        .leased()
        .unwrap();
    let fleet = fleet(1);
    let key = Key::new("k").unwrap();
    let store = &fleet.instances[0];
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let now = 1_000_000_000u64;
    let admitted = (0..20)
        .filter(|i| check(store, &key, &rule, now + i).allowed)
        .count();
    assert_eq!(admitted, 8, "the window's limit, no more");
    rt.block_on(store.apply(
        weir_core::ScopedKey::plain(&key),
        &rule,
        Op::Reset,
        now + 100,
    ))
    .unwrap();
    assert_eq!(store.held_units(now + 100), 0);
    assert!(check(store, &key, &rule, now + 200).allowed);
}

/// What a run at steady overload saw.
#[derive(Debug)]
struct Run {
    admitted: u64,
    per_instance: Vec<u64>,
    /// The longest time without an admission (from the start, between two, to the end).
    longest_gap_ns: u64,
    /// The same, per instance.
    instance_gaps_ns: Vec<u64>,
}

/// `n` instances offered `per_s` checks a second in all (in turn) for `secs` seconds;
/// `check(instance, now)` says whether one was admitted.
fn offer(n: usize, per_s: u64, secs: u64, mut check: impl FnMut(usize, u64) -> bool) -> Run {
    let start = 1_000_000_000u64;
    let end = start + secs * 1_000_000_000;
    let step = 1_000_000_000 / per_s;
    let mut last = vec![start; n];
    let mut all_last = start;
    let mut run = Run {
        admitted: 0,
        per_instance: vec![0; n],
        longest_gap_ns: 0,
        instance_gaps_ns: vec![0; n],
    };
    let (mut now, mut i) = (start, 0usize);
    while now < end {
        let who = i % n;
        if check(who, now) {
            run.admitted += 1;
            run.per_instance[who] += 1;
            run.longest_gap_ns = run.longest_gap_ns.max(now - all_last);
            run.instance_gaps_ns[who] = run.instance_gaps_ns[who].max(now - last[who]);
            all_last = now;
            last[who] = now;
        }
        now += step;
        i += 1;
    }
    run.longest_gap_ns = run.longest_gap_ns.max(end - all_last);
    for (gap, last) in run.instance_gaps_ns.iter_mut().zip(&last) {
        *gap = (*gap).max(end - last);
    }
    run
}

/// Every algorithm that leases, each 100 per 10 s.
fn hundred_per_ten_seconds() -> Vec<(&'static str, Rule)> {
    let ten = Duration::from_secs(10);
    vec![
        ("gcra", Rule::gcra(100, ten, 100).unwrap()),
        ("token_bucket", Rule::token_bucket(100, 100, ten).unwrap()),
        ("fixed_window", Rule::fixed_window(100, ten).unwrap()),
        (
            "sliding_window",
            Rule::sliding_window(100, ten, Duration::from_secs(1)).unwrap(),
        ),
        ("weighted_window", Rule::weighted_window(100, ten).unwrap()),
    ]
}

/// Issue 29: GCRA 100 per 10 s, burst 100, leased, one key offered ~80/s for 15 s admitted
/// 172 where the exact rule admits 250, with an 8.7 s gap: a claim took the whole limit,
/// the slice expired a fifth unspent, and the instance then waited for the whole limit to
/// come back. The tests above offered 10x, where a slice is always spent. Now, at 2x and
/// 8x, for every algorithm that leases, with one and two instances (and two that were told
/// they are one): at least 90 % of the exact rule, no gap longer than the exact rule's plus
/// one slice lifetime, and two instances both admit in every window.
#[test]
fn leased_rules_admit_at_their_rate_under_steady_overload() {
    for (name, exact) in hundred_per_ten_seconds() {
        let leased = exact.leased().unwrap();
        let ttl = LeaseConfig::default().ttl_ns(&leased);
        for (n, stated) in [(1, 1), (2, 2), (2, 1)] {
            for per_s in [20, 80] {
                let store = MemoryStore::default();
                let key = Key::new("hot").unwrap();
                let exact_run = offer(n, per_s, 15, |_, now| {
                    match store.apply_now(&key, &exact, Op::Check { cost: 1 }, now) {
                        Ok(Outcome::Decision(d)) => d.allowed,
                        other => panic!("{other:?}"),
                    }
                });
                let fleet = fleet_stating(n, stated);
                let run = offer(n, per_s, 15, |who, now| {
                    check(&fleet.instances[who], &key, &leased, now).allowed
                });
                let case = format!("{name}, {n} instances ({stated} stated), {per_s}/s");
                assert!(
                    run.admitted * 10 >= exact_run.admitted * 9,
                    "{case}: {run:?} of the exact {exact_run:?}"
                );
                assert!(
                    run.longest_gap_ns <= exact_run.longest_gap_ns + ttl,
                    "{case}: {run:?}, exact {exact_run:?}"
                );
                for gap in &run.instance_gaps_ns {
                    assert!(*gap <= 10_000_000_000, "{case}: one starved {run:?}");
                }
            }
        }
    }
}

fn fleet_stating(n: usize, stated: u64) -> Fleet {
    let mut fleet = fleet(n);
    let config = LeaseConfig {
        instances: stated,
        ..LeaseConfig::default()
    };
    fleet.instances = fleet
        .instances
        .into_iter()
        .map(|s| LeasedStore::new(s.inner().clone(), config))
        .collect();
    fleet
}
