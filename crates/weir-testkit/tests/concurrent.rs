//! Many threads on one key of the memory store never over-admit: at a frozen instant, the
//! admitted count under contention equals what the model admits sequentially, for every
//! algorithm; then time moves and it holds again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::sync::{Arc, Barrier};
use std::time::Duration;

use weir_core::{Key, MemoryStore, Op, Outcome, Rule};
use weir_testkit::{Model, T0_NS};

const THREADS: usize = 8;
const PER_THREAD: u64 = 500;

fn rules() -> Vec<Rule> {
    let s = Duration::from_secs(1);
    vec![
        Rule::fixed_window(1000, s).unwrap(),
        Rule::sliding_log(1000, s).unwrap(),
        Rule::sliding_window(1000, s, Duration::from_millis(100)).unwrap(),
        Rule::weighted_window(1000, s).unwrap(),
        Rule::token_bucket(1000, 1000, s).unwrap(),
        Rule::leaky_bucket(1000, 1000, s).unwrap(),
        Rule::gcra(1000, s, 1000).unwrap(),
        Rule::leaky_queue(1000, s, 1000, Duration::MAX).unwrap(),
        Rule::concurrency(1000).unwrap(),
    ]
}

fn op<'a>(rule: &Rule, holder: &'a str) -> Op<'a> {
    if matches!(rule.algorithm(), weir_core::Algorithm::Concurrency(_)) {
        Op::Acquire {
            holder,
            ttl_ns: 10_000_000_000,
        }
    } else {
        Op::Check { cost: 1 }
    }
}

fn allowed(o: Result<Outcome, weir_core::CheckError>) -> bool {
    matches!(o, Ok(Outcome::Decision(d)) if d.allowed)
}

#[test]
fn contention_on_one_key_admits_exactly_what_the_model_admits() {
    for rule in rules() {
        let store = MemoryStore::default();
        let key = Key::new("hot").unwrap();
        let mut model = Model::new();
        for phase in 0..4u64 {
            let now = T0_NS + phase * 400_000_000;
            let barrier = Arc::new(Barrier::new(THREADS));
            let admitted: u64 = std::thread::scope(|scope| {
                let handles: Vec<_> = (0..THREADS)
                    .map(|t| {
                        let (store, key, barrier) = (&store, &key, barrier.clone());
                        scope.spawn(move || {
                            barrier.wait();
                            (0..PER_THREAD)
                                .filter(|i| {
                                    let holder = format!("p{phase}-t{t}-{i}");
                                    allowed(store.apply_now(key, &rule, op(&rule, &holder), now))
                                })
                                .count() as u64
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).sum()
            });
            let expected = (0..THREADS as u64 * PER_THREAD)
                .filter(|i| {
                    let holder = format!("model-p{phase}-{i}");
                    allowed(model.apply(&key, &rule, op(&rule, &holder), now))
                })
                .count() as u64;
            assert_eq!(
                admitted,
                expected,
                "{} phase {phase}: {admitted} admitted under contention, {expected} sequentially",
                rule.algorithm().name()
            );
        }
    }
}
