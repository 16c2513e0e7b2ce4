//! Many tasks on one key at one frozen instant, spread over two stores (two pools, as two
//! instances of a service would have), against a real memcached. The record
//! algorithms (`gets`/`cas`) must admit exactly what the model admits sequentially; the
//! `incr` counters must never admit more than the limit, and exactly the limit with unit
//! costs (the bound documented in the crate docs).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Decision, Key, Op, Outcome, Rule, Store};
use weir_memcached::MemcachedStore;
use weir_testkit::servers::Memcached;
use weir_testkit::{Model, T0_NS};

const TASKS: usize = 64;

/// Two stores on one server: two instances sharing limits.
fn instances(server: &Memcached) -> [MemcachedStore; 2] {
    let one = || {
        MemcachedStore::builder(&server.url())
            .pool_size(16)
            .timeout(Duration::from_secs(5))
            // Far above what 64 contenders need (the default of 64 suffices here), so a
            // loaded CI machine cannot turn contention into a failure.
            .max_retries(10_000)
            .build()
            .unwrap()
    };
    [one(), one()]
}

/// Runs `TASKS` tasks, each checking `costs[i % len]` once on `key` at `T0_NS`; returns the
/// costs admitted.
async fn hammer(stores: &[MemcachedStore], key: &str, rule: Rule, costs: &[u64]) -> Vec<u64> {
    let key = Key::new(key).unwrap();
    let mut tasks = Vec::new();
    for i in 0..TASKS {
        let (store, key) = (stores[i % stores.len()].clone(), key.clone());
        let cost = costs[i % costs.len()];
        tasks.push(tokio::spawn(async move {
            let op = Op::Check { cost };
            match store
                .apply(weir_core::ScopedKey::plain(&key), &rule, op, T0_NS)
                .await
            {
                Ok(Outcome::Decision(Decision { allowed, .. })) => allowed.then_some(cost),
                other => panic!("check failed: {other:?}"),
            }
        }));
    }
    let mut admitted = Vec::new();
    for task in tasks {
        admitted.extend(task.await.unwrap());
    }
    admitted
}

/// What the model admits for the same checks one after the other.
fn sequential(rule: &Rule, costs: &[u64]) -> u64 {
    let mut model = Model::new();
    let key = Key::new("k").unwrap();
    (0..TASKS)
        .map(|i| costs[i % costs.len()])
        .filter(|&cost| {
            matches!(
                model.apply(&key, rule, Op::Check { cost }, T0_NS),
                Ok(Outcome::Decision(Decision { allowed: true, .. }))
            )
        })
        .count() as u64
}

fn rules_kept_as_records() -> Vec<(&'static str, Rule)> {
    let s = Duration::from_secs(1);
    vec![
        ("gcra", Rule::gcra(10, s, 10).unwrap()),
        ("token_bucket", Rule::token_bucket(10, 1, s).unwrap()),
        ("leaky_bucket", Rule::leaky_bucket(10, 1, s).unwrap()),
        ("sliding_log", Rule::sliding_log(10, s).unwrap()),
        (
            "leaky_queue",
            Rule::leaky_queue(10, s, 10, Duration::MAX).unwrap(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn record_algorithms_admit_exactly_the_sequential_count() {
    let server = Memcached::start();
    let stores = instances(&server);
    let run = async {
        for (name, rule) in rules_kept_as_records() {
            let admitted = hammer(&stores, &format!("cas:{name}"), rule, &[1]).await;
            assert_eq!(
                admitted.len() as u64,
                sequential(&rule, &[1]),
                "{name}: {TASKS} concurrent checks"
            );
        }
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("bounded in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn leases_never_exceed_their_maximum() {
    let server = Memcached::start();
    let stores = instances(&server);
    let rule = Rule::concurrency(5).unwrap();
    let key = Key::new("cas:leases").unwrap();
    let run = async {
        let mut tasks = Vec::new();
        for i in 0..TASKS {
            let (store, key) = (stores[i % 2].clone(), key.clone());
            tasks.push(tokio::spawn(async move {
                let holder = format!("worker-{i}");
                let op = Op::Acquire {
                    holder: &holder,
                    ttl_ns: 1_000_000_000,
                };
                matches!(
                    store
                        .apply(weir_core::ScopedKey::plain(&key), &rule, op, T0_NS)
                        .await,
                    Ok(Outcome::Decision(Decision { allowed: true, .. }))
                )
            }));
        }
        let mut granted = 0;
        for task in tasks {
            granted += usize::from(task.await.unwrap());
        }
        assert_eq!(granted, 5);
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("bounded in time");
}

fn counters() -> Vec<(&'static str, Rule)> {
    let s = Duration::from_secs(1);
    vec![
        ("fixed_window", Rule::fixed_window(10, s).unwrap()),
        (
            "sliding_window",
            Rule::sliding_window(10, s, Duration::from_millis(100)).unwrap(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_admit_exactly_the_limit_with_unit_costs() {
    let server = Memcached::start();
    let stores = instances(&server);
    let run = async {
        for (name, rule) in counters() {
            let admitted = hammer(&stores, &format!("incr:{name}"), rule, &[1]).await;
            assert_eq!(admitted.len() as u64, sequential(&rule, &[1]), "{name}");
        }
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("bounded in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn counters_never_over_admit_with_mixed_costs() {
    let server = Memcached::start();
    let stores = instances(&server);
    let costs = [1, 3, 2, 5, 1, 4];
    let run = async {
        for round in 0..5 {
            for (name, rule) in counters() {
                let key = format!("incr-mixed:{name}:{round}");
                let admitted: u64 = hammer(&stores, &key, rule, &costs).await.iter().sum();
                // The documented bound: never more than the limit at one instant; fewer only
                // while a denied request's `incr` awaits its `decr` (spurious denials).
                assert!(admitted <= rule.limit(), "{name}: {admitted} > limit");
                let check = stores[0]
                    .apply(
                        weir_core::ScopedKey::plain(&Key::new(key).unwrap()),
                        &rule,
                        Op::Inspect,
                        T0_NS,
                    )
                    .await;
                let Ok(Outcome::Usage(usage)) = check else {
                    panic!("inspect: {check:?}")
                };
                assert_eq!(usage.used, admitted, "{name}: every rollback landed");
                eprintln!(
                    "{name} round {round}: admitted {admitted} of {} units",
                    rule.limit()
                );
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("bounded in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn check_all_never_over_admits_either_limit() {
    let server = Memcached::start();
    let stores = instances(&server);
    let s = Duration::from_secs(1);
    let limits = Arc::new([
        (
            Key::new("all:fixed").unwrap(),
            Rule::fixed_window(7, s).unwrap(),
        ),
        (
            Key::new("all:gcra").unwrap(),
            Rule::gcra(10, s, 10).unwrap(),
        ),
    ]);
    let run = async {
        let mut tasks = Vec::new();
        for i in 0..TASKS {
            let (store, limits) = (stores[i % 2].clone(), Arc::clone(&limits));
            tasks.push(tokio::spawn(async move {
                store
                    .check_all(weir_core::ScopedLimits::plain(&limits[..]), 1, T0_NS)
                    .await
                    .unwrap()
                    .allowed
            }));
        }
        let mut admitted = 0u64;
        for task in tasks {
            admitted += u64::from(task.await.unwrap());
        }
        // memcached cannot make check_all atomic (crate docs, "What memcached cannot do
        // atomically"): under this much contention a request may be denied spuriously (another
        // task's charge seen before its rollback, or left by a rollback that lost a race), but
        // never admitted past the tighter limit (7). Asserting exactly 7 failed about one run
        // in four once calls were pipelined.
        assert!(
            (1..=7).contains(&admitted),
            "at most the tighter limit: {admitted}"
        );
        for (key, rule) in limits.iter() {
            let Ok(Outcome::Usage(u)) = stores[1]
                .apply(weir_core::ScopedKey::plain(key), rule, Op::Inspect, T0_NS)
                .await
            else {
                panic!("inspect")
            };
            // Every admitted request is charged; a rollback that found the value already
            // changed by another task leaves its charge (the crate docs: it only denies more).
            assert!(
                u.used >= admitted,
                "{key:?}: {} charged for {admitted} admitted",
                u.used
            );
        }
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("bounded in time");
}
