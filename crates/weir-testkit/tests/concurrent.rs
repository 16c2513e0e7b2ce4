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
        // 8 bytes: GCRA takes the memory store's lock-free path.
        let key = Key::new("hot-key!").unwrap();
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

/// The memory store's lock-free path under contention while records move to the general
/// path and back: threads check 64 eight-byte keys under GCRA (then a token bucket, then a
/// fixed window: the one-word rules) while another inspects and penalises some of them
/// (which moves them), at a frozen instant. Every key admits exactly its burst, whichever
/// path decided each check: no admission is lost or doubled by a move, a claim or an
/// eviction.
#[test]
fn lock_free_checks_racing_moves_admit_exactly_the_burst() {
    const BURST: u64 = 50;
    let hour = Duration::from_secs(3600);
    for rule in [
        Rule::gcra(1, hour, BURST).unwrap(),
        Rule::token_bucket(BURST, 1, hour).unwrap(),
        Rule::fixed_window(BURST, hour).unwrap(),
    ] {
        checks_racing_moves_admit_exactly(&rule, BURST);
    }
}

fn checks_racing_moves_admit_exactly(rule: &Rule, burst: u64) {
    const KEYS: u64 = 64;
    let store = MemoryStore::default();
    let now = T0_NS;
    let barrier = Barrier::new(THREADS + 1);
    let admitted: Vec<u64> = std::thread::scope(|scope| {
        let checkers: Vec<_> = (0..THREADS as u64)
            .map(|t| {
                let (store, barrier) = (&store, &barrier);
                scope.spawn(move || {
                    barrier.wait();
                    let mut admitted = vec![0u64; usize::try_from(KEYS).unwrap()];
                    for i in 0..KEYS * burst {
                        let k = (i * 7 + t * 13) % KEYS;
                        let check = Op::Check { cost: 1 };
                        if allowed(store.apply_now(&Key::from(k), rule, check, now)) {
                            admitted[usize::try_from(k).unwrap()] += 1;
                        }
                    }
                    admitted
                })
            })
            .collect();
        let mover = {
            let (store, barrier) = (&store, &barrier);
            scope.spawn(move || {
                barrier.wait();
                for i in 0..KEYS * 20 {
                    let key = Key::from((i * 5) % KEYS);
                    // A penalty of 0 and an inspect change nothing but move the record.
                    let op = if i % 2 == 0 {
                        Op::Inspect
                    } else {
                        Op::Penalty { n: 0 }
                    };
                    store.apply_now(&key, rule, op, now).unwrap();
                }
            })
        };
        mover.join().unwrap();
        let mut total = vec![0u64; usize::try_from(KEYS).unwrap()];
        for h in checkers {
            for (sum, n) in total.iter_mut().zip(h.join().unwrap()) {
                *sum += n;
            }
        }
        total
    });
    let name = rule.algorithm().name();
    for (k, n) in admitted.iter().enumerate() {
        assert_eq!(
            *n, burst,
            "{name}: key {k} admitted {n}, its burst is {burst}"
        );
    }
}

/// The lock-free table makes room for a new key by moving another key's record to its
/// second bucket (copied, then the original vacated). Threads check thousands of
/// eight-byte keys, most of them new on their first check so that full buckets make
/// records move, while another thread inspects keys (which moves their records to the
/// general path, racing the moves within the table), at a frozen instant. Every key admits
/// exactly its burst: a move neither loses nor doubles an admission, and afterwards each
/// key is held once.
#[test]
fn records_moved_to_make_room_admit_exactly_the_burst() {
    const BURST: u64 = 3;
    const KEYS: u64 = 3_900;
    let rule = Rule::gcra(1, Duration::from_secs(3600), BURST).unwrap();
    // 4096 records: 1280 buckets of four slots, three quarters full, never full enough to
    // evict.
    let store = MemoryStore::builder()
        .capacity(4096)
        .rule_share(100)
        .build();
    let now = T0_NS;
    let barrier = Barrier::new(THREADS + 1);
    let admitted: Vec<u64> = std::thread::scope(|scope| {
        let checkers: Vec<_> = (0..THREADS as u64)
            .map(|t| {
                let (store, barrier, rule) = (&store, &barrier, &rule);
                scope.spawn(move || {
                    barrier.wait();
                    let mut admitted = vec![0u64; usize::try_from(KEYS).unwrap()];
                    for i in 0..KEYS * (BURST + 1) {
                        // Each thread its own order (a stride prime to KEYS).
                        let k = (i * (2 * t + 1) * 7 + t * 977) % KEYS;
                        let check = Op::Check { cost: 1 };
                        if allowed(store.apply_now(&Key::from(k), rule, check, now)) {
                            admitted[usize::try_from(k).unwrap()] += 1;
                        }
                    }
                    admitted
                })
            })
            .collect();
        let inspector = {
            let (store, barrier, rule) = (&store, &barrier, &rule);
            scope.spawn(move || {
                barrier.wait();
                for i in 0..KEYS / 4 {
                    let key = Key::from((i * 13) % KEYS);
                    store.apply_now(&key, rule, Op::Inspect, now).unwrap();
                }
            })
        };
        inspector.join().unwrap();
        let mut total = vec![0u64; usize::try_from(KEYS).unwrap()];
        for h in checkers {
            for (sum, n) in total.iter_mut().zip(h.join().unwrap()) {
                *sum += n;
            }
        }
        total
    });
    for (k, n) in admitted.iter().enumerate() {
        assert_eq!(*n, BURST, "key {k} admitted {n}, its burst is {BURST}");
    }
    let stats = store.stats();
    assert!(stats.lock_free_moves > 0, "records were moved: {stats:?}");
    assert_eq!(stats.evictions, 0, "{stats:?}");
    assert_eq!(
        stats.len,
        usize::try_from(KEYS).unwrap(),
        "each key held once: {stats:?}"
    );
}
