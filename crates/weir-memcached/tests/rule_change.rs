//! Rule changes on a live key, compared with the model: the changes this store carries over
//! exactly (a counter's new limit or window over the same buckets, any change of a record
//! algorithm, from a record algorithm to a counter and back, and a block or lockout strikes
//! across algorithms).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Key, Lockout, Op, Rule, Store};
use weir_memcached::MemcachedStore;
use weir_testkit::servers::Memcached;
use weir_testkit::{Model, T0_NS};

/// Replays `steps` (rule index, op, ns advanced after) on the store and the model.
async fn replay(store: &MemcachedStore, key: &str, rules: &[Rule], steps: &[(usize, Op<'_>, u64)]) {
    let key = Key::new(key).unwrap();
    let mut model = Model::new();
    let mut now = T0_NS;
    for (i, (rule, op, advance)) in steps.iter().enumerate() {
        let rule = &rules[*rule];
        let got = store
            .apply(weir_core::ScopedKey::plain(&key), rule, *op, now)
            .await;
        let want = model.apply(&key, rule, *op, now);
        assert_eq!(got, want, "{key:?} step {i}: {op:?} on {rule:?}");
        now += advance;
    }
}

fn steps(rules: usize) -> Vec<(usize, Op<'static>, u64)> {
    let mut steps = Vec::new();
    for round in 0..4 {
        for r in 0..rules {
            steps.push((r, Op::Check { cost: 1 }, 7_000_000));
            steps.push((r, Op::Check { cost: 2 }, 0));
            steps.push((r, Op::Inspect, 0));
            if round == 2 {
                steps.push((r, Op::Penalty { n: 1 }, 0));
            }
        }
    }
    steps
}

#[tokio::test]
async fn changes_carried_over_exactly() {
    let server = Memcached::start();
    let store = MemcachedStore::builder(&server.url())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    let cases: Vec<(&str, Vec<Rule>)> = vec![
        (
            "fixed-limit",
            vec![
                Rule::fixed_window(4, ms(100)).unwrap(),
                Rule::fixed_window(7, ms(100)).unwrap(),
            ],
        ),
        (
            "sliding-window",
            vec![
                Rule::sliding_window(5, ms(100), ms(10)).unwrap(),
                Rule::sliding_window(3, ms(50), ms(10)).unwrap(),
            ],
        ),
        (
            "records",
            vec![
                Rule::gcra(5, ms(100), 5).unwrap(),
                Rule::token_bucket(3, 1, ms(10)).unwrap(),
                Rule::sliding_log(4, ms(100)).unwrap(),
            ],
        ),
    ];
    // From a record algorithm to a counter and back: the counter deletes the record's state.
    // (The other way round is not exact, as the crate docs say.)
    let there_and_back = [
        Rule::gcra(5, ms(100), 5).unwrap(),
        Rule::fixed_window(6, ms(1000)).unwrap(),
    ];
    let mut there_and_back_steps = Vec::new();
    for rule in [0, 0, 1, 1, 0, 0] {
        there_and_back_steps.push((rule, Op::Check { cost: 2 }, 1_000_000));
        there_and_back_steps.push((rule, Op::Inspect, 0));
    }
    let run = async {
        for (name, rules) in &cases {
            replay(&store, name, rules, &steps(rules.len())).await;
        }
        replay(
            &store,
            "there-and-back",
            &there_and_back,
            &there_and_back_steps,
        )
        .await;
    };
    tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .expect("bounded in time");
}

#[tokio::test]
async fn blocks_and_strikes_carry_over_between_algorithms() {
    let server = Memcached::start();
    let store = MemcachedStore::builder(&server.url())
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let ms = Duration::from_millis;
    let lockout = Lockout::new(ms(30)).unwrap().escalating(ms(120)).unwrap();
    let rules = [
        Rule::fixed_window(1, ms(10)).unwrap().with_lockout(lockout),
        Rule::gcra(1, ms(10), 1).unwrap().with_lockout(lockout),
        Rule::sliding_window(1, ms(10), ms(5))
            .unwrap()
            .with_lockout(lockout),
    ];
    let steps = [
        (0, Op::Check { cost: 1 }, 0),
        (0, Op::Check { cost: 1 }, 1_000_000), // locked out by the fixed window
        (1, Op::Check { cost: 1 }, 0),         // still locked under GCRA
        (1, Op::Inspect, 40_000_000),
        (1, Op::Check { cost: 1 }, 0),
        (1, Op::Check { cost: 1 }, 0), // a second strike, from GCRA
        (2, Op::Inspect, 0),           // seen by the sliding window
        (2, Op::Unblock, 0),
        (2, Op::Check { cost: 1 }, 0),
        (
            0,
            Op::Block {
                duration_ns: 5_000_000,
            },
            0,
        ),
        (1, Op::Check { cost: 0 }, 6_000_000),
        (2, Op::Reset, 0),
        (0, Op::Inspect, 0),
    ];
    replay(&store, "guard", &rules, &steps).await;
}
