//! Contention on one key of one Redis: several runtimes (each on its own thread, with its
//! own store and connection, as separate processes would be) × 64 tasks check the same key
//! at a frozen process time. Each script runs atomically, so the number admitted equals
//! what the model admits for the same number of requests one after another, for every
//! exact algorithm; then time moves and it holds again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Algorithm, CheckError, Key, Op, Outcome, Rule, Store};
use weir_redis::{RedisStore, TimeSource};
use weir_testkit::servers::RedisServer;
use weir_testkit::{Model, T0_NS};

const RUNTIMES: usize = 4;
const TASKS: usize = 64;
const PER_TASK: usize = 2;

fn rules() -> Vec<Rule> {
    let s = Duration::from_secs(1);
    vec![
        Rule::sliding_log(100, s).unwrap(),
        Rule::token_bucket(100, 100, s).unwrap(),
        Rule::leaky_bucket(100, 100, s).unwrap(),
        Rule::gcra(100, s, 100).unwrap(),
        Rule::leaky_queue(100, s, 100, Duration::MAX).unwrap(),
        Rule::concurrency(100).unwrap(),
    ]
}

fn op<'a>(rule: &Rule, holder: &'a str) -> Op<'a> {
    if matches!(rule.algorithm(), Algorithm::Concurrency(_)) {
        Op::Acquire {
            holder,
            ttl_ns: 1_000_000_000,
        }
    } else {
        Op::Check { cost: 1 }
    }
}

fn allowed(o: &Result<Outcome, CheckError>) -> bool {
    match o {
        Ok(Outcome::Decision(d)) => d.allowed,
        Ok(other) => panic!("{other:?}"),
        Err(e) => panic!("store error under contention: {e}"),
    }
}

/// One runtime's share of a phase: 64 tasks, each checking the key `PER_TASK` times.
fn runtime_share(url: &str, key: &Key, rule: Rule, now: u64, runtime: usize, batch: bool) -> u64 {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut builder = RedisStore::builder(url)
            .time_source(TimeSource::Process)
            .ttl_grace(Duration::from_secs(600))
            .timeout(Duration::from_secs(10));
        if batch {
            builder = builder.batch(64, Duration::from_micros(200));
        }
        let store = builder.build().unwrap();
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                let (store, key) = (store.clone(), key.clone());
                tokio::spawn(async move {
                    let mut admitted = 0u64;
                    for i in 0..PER_TASK {
                        let holder = format!("t{now}-r{runtime}-{task}-{i}");
                        if allowed(
                            &store
                                .apply(
                                    weir_core::ScopedKey::plain(&key),
                                    &rule,
                                    op(&rule, &holder),
                                    now,
                                )
                                .await,
                        ) {
                            admitted += 1;
                        }
                    }
                    admitted
                })
            })
            .collect();
        let mut admitted = 0;
        for t in tasks {
            admitted += t.await.unwrap();
        }
        admitted
    })
}

/// Script calls Redis has run so far (FCALL, EVALSHA and EVAL).
fn script_calls(redis: &RedisServer) -> u64 {
    let info = redis.raw("INFO commandstats").unwrap_or_default();
    info.lines()
        .filter(|l| {
            ["cmdstat_fcall:", "cmdstat_evalsha:", "cmdstat_eval:"]
                .iter()
                .any(|c| l.starts_with(c))
        })
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[test]
fn contention_on_one_key_admits_exactly_what_the_model_admits() {
    contention(false);
}

#[test]
fn batched_contention_admits_exactly_what_the_model_admits_in_fewer_calls() {
    contention(true);
}

fn contention(batch: bool) {
    let redis = RedisServer::start();
    let mut decisions = 0;
    let url = redis.url();
    for rule in rules() {
        let key = Key::new(format!("hot:{}", rule.algorithm().name())).unwrap();
        let mut model = Model::new();
        for phase in 0..4u64 {
            let now = T0_NS + phase * 600_000_000;
            let admitted: u64 = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..RUNTIMES)
                    .map(|r| {
                        let (url, key) = (&url, &key);
                        scope.spawn(move || runtime_share(url, key, rule, now, r, batch))
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            let total = RUNTIMES * TASKS * PER_TASK;
            decisions += total as u64;
            let expected = (0..total)
                .filter(|i| {
                    let holder = format!("model-{now}-{i}");
                    allowed(&model.apply(&key, &rule, op(&rule, &holder), now))
                })
                .count() as u64;
            assert!(expected < total as u64, "phase {phase} limits nothing");
            assert!(
                phase % 2 == 1 || expected > 0,
                "phase {phase} admits nothing"
            );
            assert_eq!(
                admitted,
                expected,
                "{} phase {phase}: {admitted} admitted under contention, {expected} sequentially",
                rule.algorithm().name()
            );
        }
    }
    let calls = script_calls(&redis);
    eprintln!("{calls} script calls for {decisions} decisions (batching {batch})");
    if batch {
        assert!(
            calls * 4 < decisions,
            "{calls} script calls for {decisions} decisions: batches did not coalesce"
        );
    } else {
        assert!(
            calls >= decisions,
            "{calls} script calls for {decisions} decisions"
        );
    }
}
