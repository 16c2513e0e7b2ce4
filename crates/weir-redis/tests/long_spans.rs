//! Long spans and large numbers, where Lua's doubles could lose exactness: windows and
//! refill periods of days to 26 days, limits up to 10^9, time jumps of hours to weeks (so
//! records are rebased onto a new base), against the model under the manual clock. Every
//! outcome must equal the model's to the nanosecond, except that the store may refuse an
//! operation that would push a record more than 2^52 ns past now, and then only exactly
//! when the model's record would reach that far (and the store is left unchanged).
//!
//! The conformance suites use windows of at most a second; this file covers the other end
//! of the range: the weighted window's `previous × elapsed / window` far above 2^53, epoch
//! alignment of 25-day windows, the warm-up ramp's `x² / 2X` of 25-day warm-ups, and
//! instants kept across rebases.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{CheckError, Key, Lockout, Op, Rule, Store};
use weir_redis::{RedisStore, TimeSource};
use weir_testkit::servers::RedisServer;
use weir_testkit::{Model, T0_NS};

const HOUR: u64 = 3_600_000_000_000;
const DAY: u64 = 24 * HOUR;
const REACH_NS: u64 = 1 << 52;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 11) % below.max(1)
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[usize::try_from(self.next(items.len() as u64)).unwrap()]
    }
}

fn rule(rng: &mut Lcg) -> Rule {
    let d = Duration::from_nanos;
    let limit = rng.pick(&[3u64, 17, 1_000, 1_000_000, 1_000_000_000]);
    let window = rng.pick(&[HOUR, DAY, 7 * DAY, 25 * DAY]);
    let rule = match rng.next(9) {
        0 => Rule::fixed_window(limit, d(window)).unwrap(),
        1 => Rule::sliding_log(rng.pick(&[3u64, 40]), d(window)).unwrap(),
        2 => Rule::sliding_window(limit, d(window), d(window / rng.pick(&[4u64, 24]))).unwrap(),
        3 => Rule::weighted_window(limit, d(window)).unwrap(),
        4 => {
            let cap = rng.pick(&[3u64, 1_000]);
            Rule::token_bucket(cap, 1, d(window / cap))
                .unwrap()
                .with_initial_tokens(rng.next(cap + 1))
                .unwrap()
        }
        5 => {
            let cap = rng.pick(&[3u64, 1_000]);
            Rule::leaky_bucket(cap, 1, d(window / cap)).unwrap()
        }
        6 => {
            let burst = rng.pick(&[2u64, 500]);
            Rule::gcra(burst, d(window), burst).unwrap()
        }
        7 => {
            let depth = rng.pick(&[2u64, 50]);
            let wait = rng.pick(&[Duration::MAX, d(window / 3)]);
            Rule::leaky_queue(depth, d(window), depth, wait).unwrap()
        }
        _ => Rule::concurrency(rng.pick(&[1u64, 3])).unwrap(),
    };
    // Warm-up up to 25 days (the ramp's x² / 2X far above 2^53), cold factors 2 to 100.
    let warms = rule.with_warmup(d(HOUR), 3).is_ok();
    let rule = if warms && rng.next(2) == 0 {
        let period = rng.pick(&[HOUR, DAY, 25 * DAY]);
        rule.with_warmup(d(period), rng.pick(&[2u64, 3, 100]))
            .unwrap()
    } else {
        rule
    };
    if rng.next(3) == 0 && !matches!(rule.algorithm(), weir_core::Algorithm::Concurrency(_)) {
        let lockout = Lockout::new(d(DAY))
            .unwrap()
            .escalating(d(8 * DAY))
            .unwrap()
            .forgive_after(d(10 * DAY));
        rule.with_lockout(lockout)
    } else {
        rule
    }
}

/// Any operation, including ones the rule does not support (refused before any round
/// trip, as the model refuses them).
fn op<'a>(rng: &mut Lcg, rule: &Rule, holders: &'a [&'a str]) -> Op<'a> {
    let limit = rule.limit();
    match rng.next(12) {
        0 => Op::Penalty {
            n: rng.next(limit + 1),
        },
        1 => Op::Reward {
            n: rng.next(2 * limit + 1),
        },
        2 => Op::Block {
            duration_ns: rng.next(10 * DAY),
        },
        3 => Op::Unblock,
        4 => Op::Reset,
        5 => Op::Inspect,
        6 | 7 => Op::Acquire {
            holder: rng.pick(holders),
            ttl_ns: 1 + rng.next(20 * DAY),
        },
        8 => Op::Release {
            holder: rng.pick(holders),
        },
        _ => Op::Check {
            cost: rng.next(limit + 2),
        },
    }
}

fn advance(rng: &mut Lcg) -> u64 {
    match rng.next(6) {
        0 => 0,
        1 => rng.next(1_000_000),
        2 => rng.next(HOUR),
        3 => rng.next(DAY),
        4 => rng.next(7 * DAY),
        _ => rng.next(30 * DAY),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_spans_and_large_numbers_stay_exact() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::from_secs(600))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let holders = ["h0", "h1", "h2", "h3"];
    let mut rng = Lcg(0x5745_4952);
    let mut refusals = 0;
    for case in 0..300u64 {
        let rule = rule(&mut rng);
        let key = Key::new(format!("long:{case}")).unwrap();
        let mut model = Model::new();
        let mut now = T0_NS + rng.next(DAY);
        let mut history = Vec::new();
        for step in 0..40 {
            now += advance(&mut rng);
            let op = op(&mut rng, &rule, &holders);
            let got = store
                .apply(weir_core::ScopedKey::plain(&key), &rule, op, now)
                .await;
            let mut trial = model.clone();
            let want = trial.apply(&key, &rule, op, now);
            history.push(format!(
                "{now}: {op:?} -> {want:?} {:?}",
                trial.record(&key)
            ));
            match got {
                Err(CheckError::Invalid { reason, .. }) if reason.contains("horizon") => {
                    let reach = trial.record(&key).map_or(0, |r| r.expires_ns - now);
                    assert!(
                        reach > REACH_NS,
                        "case {case} step {step}: refused {op:?} on {rule:?}, reach {reach}"
                    );
                    refusals += 1;
                }
                got => {
                    assert_eq!(
                        got,
                        want,
                        "case {case} step {step}: {op:?} on {rule:?} at {now}\n{}",
                        history.join("\n")
                    );
                    model = trial;
                }
            }
        }
    }
    eprintln!("{refusals} operations refused at the horizon");
}
