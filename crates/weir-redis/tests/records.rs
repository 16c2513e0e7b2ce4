//! What Redis holds, looked at directly: key names and hash tags, the prefix, one string
//! per key in the documented layout, a TTL that ends at freshness (and follows it as checks
//! move it), no key for an operation that adds no usage, a deleted key once the state is
//! fresh, unreadable records (an older version's hash among them) reported as corrupt and
//! left alone, and refusals at the horizon that change nothing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::future::Future;
use std::time::Duration;

use weir_core::{CheckError, Key, Op, Outcome, Rule, Store, StoreError};
use weir_redis::{RedisStore, TimeSource, MAX_SPAN};
use weir_testkit::servers::RedisServer;
use weir_testkit::T0_NS;

const SEC: u64 = 1_000_000_000;

fn store(redis: &RedisServer, prefix: &str) -> RedisStore {
    RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::ZERO)
        .prefix(prefix)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

fn raw(redis: &RedisServer, command: &str) -> String {
    redis.raw(command).unwrap_or_default()
}

/// The record at `key` (a string), split into its space-separated fields; a sliding
/// window's buckets (raw bytes, last) are left as one field, as read.
fn fields(redis: &RedisServer, key: &str) -> Vec<String> {
    let reply = raw(redis, &format!("GET {key}"));
    let (_, text) = reply
        .strip_prefix('$')
        .and_then(|r| r.split_once("\r\n"))
        .unwrap_or_else(|| panic!("{key}: not a string: {reply:?}"));
    let text = text.strip_suffix("\r\n").unwrap();
    let last = if text.starts_with("sl ") {
        5
    } else {
        usize::MAX
    };
    text.splitn(last, ' ').map(str::to_owned).collect()
}

async fn check(
    store: &RedisStore,
    key: &str,
    rule: &Rule,
    now: u64,
) -> Result<Outcome, CheckError> {
    store
        .apply(
            weir_core::ScopedKey::plain(&Key::new(key).unwrap()),
            rule,
            Op::Check { cost: 1 },
            now,
        )
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_are_named_tagged_and_kept_exactly_while_live() {
    let redis = RedisServer::start();
    let store = store(&redis, "rl");
    let rule = Rule::fixed_window(5, Duration::from_secs(10)).unwrap();

    // A peek adds no usage: no key.
    let peek = store
        .apply(
            weir_core::ScopedKey::plain(&Key::new("alice").unwrap()),
            &rule,
            Op::Check { cost: 0 },
            T0_NS,
        )
        .await
        .unwrap();
    assert!(matches!(peek, Outcome::Decision(d) if d.allowed));
    assert_eq!(raw(&redis, "DBSIZE"), ":0\r\n");

    // A check creates the record under the prefix, tagged by the key: one string, `a b x`
    // then the algorithm's fields (a fixed window's start and count).
    check(&store, "alice", &rule, T0_NS).await.unwrap();
    assert_eq!(raw(&redis, "TYPE rl:{alice}"), "+string\r\n");
    let record = fields(&redis, "rl:{alice}");
    assert_eq!(record.len(), 5, "{record:?}");
    assert_eq!(record[0], "fw");
    assert_eq!(record[1], (T0_NS / SEC).to_string());
    assert_eq!(record[4], "1");
    // Its TTL ends when the window does: the window of T0 ends 9.876543211 s later.
    let pttl: i64 = raw(&redis, "PTTL rl:{alice}")
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap();
    assert!((9_000..=9_877).contains(&pttl), "{pttl}");

    // A key with its own tag keeps it, so limits of one user share a slot.
    check(&store, "api:1s:{user-7}", &rule, T0_NS)
        .await
        .unwrap();
    assert_eq!(raw(&redis, "EXISTS rl::api:1s:{user-7}"), ":1\r\n");

    // A reward that leaves the state fresh deletes the key.
    store
        .apply(
            weir_core::ScopedKey::plain(&Key::new("alice").unwrap()),
            &rule,
            Op::Reward { n: 1 },
            T0_NS,
        )
        .await
        .unwrap();
    assert_eq!(raw(&redis, "EXISTS rl:{alice}"), ":0\r\n");
}

fn pttl(redis: &RedisServer, key: &str) -> i64 {
    raw(redis, &format!("PTTL {key}"))
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ttl_follows_the_expiry_on_every_write_and_only_then() {
    // Plain checks, which the scripts' fast path answers: the TTL moves with the state's
    // freshness when an allowed check moves it, and a denial writes nothing.
    let redis = RedisServer::start();
    let store = store(&redis, "ttl");
    // GCRA, 1 per 10 s with a burst of 3: each allowed check moves freshness 10 s on.
    let rule = Rule::gcra(1, Duration::from_secs(10), 3).unwrap();
    for n in 1..=3_i64 {
        let outcome = check(&store, "g", &rule, T0_NS).await.unwrap();
        assert!(matches!(outcome, Outcome::Decision(d) if d.allowed));
        let ttl = pttl(&redis, "ttl:{g}");
        assert!(
            (n * 10_000 - 1_000..=n * 10_000).contains(&ttl),
            "{n}: {ttl}"
        );
    }
    let before = raw(&redis, "GET ttl:{g}");
    let outcome = check(&store, "g", &rule, T0_NS).await.unwrap();
    assert!(matches!(outcome, Outcome::Decision(d) if !d.allowed));
    assert_eq!(raw(&redis, "GET ttl:{g}"), before);
    assert!(pttl(&redis, "ttl:{g}") > 29_000);

    // A fixed window: checks in one window leave the TTL set by the first (the window of
    // T0 ends 9.876543211 s later); the first check of the next window moves it to that
    // window's end, as far from its now.
    let rule = Rule::fixed_window(5, Duration::from_secs(10)).unwrap();
    check(&store, "w", &rule, T0_NS).await.unwrap();
    raw(&redis, "PEXPIRE ttl:{w} 20000"); // a TTL the next check must leave alone
    check(&store, "w", &rule, T0_NS + SEC).await.unwrap();
    assert!((19_000..=20_000).contains(&pttl(&redis, "ttl:{w}")));
    assert_eq!(fields(&redis, "ttl:{w}")[4], "2");
    check(&store, "w", &rule, T0_NS + 10 * SEC).await.unwrap();
    assert!((9_000..=9_877).contains(&pttl(&redis, "ttl:{w}")));
    assert_eq!(fields(&redis, "ttl:{w}")[4], "1");

    // A sliding log: an expired record is read as fresh and written anew.
    let rule = Rule::sliding_log(2, Duration::from_secs(10)).unwrap();
    check(&store, "s", &rule, T0_NS).await.unwrap();
    check(&store, "s", &rule, T0_NS + 20 * SEC).await.unwrap();
    assert!((9_000..=10_000).contains(&pttl(&redis, "ttl:{s}")));
    assert_eq!(fields(&redis, "ttl:{s}")[3], "1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreadable_records_are_corrupt_and_left_alone() {
    let redis = RedisServer::start();
    let store = store(&redis, "weir");
    let rule = Rule::per_second(10).unwrap();
    let corrupt = |r: Result<Outcome, CheckError>| match r {
        Err(CheckError::Store(StoreError::Corrupt(msg))) => msg,
        other => panic!("expected Corrupt, got {other:?}"),
    };

    // A record of an older Weir (a hash): corrupt, never overwritten (see the crate docs'
    // upgrade note).
    raw(
        &redis,
        "HSET weir:{old} b 1700000000 x 99999999999 a gc t 5",
    );
    let msg = corrupt(check(&store, "old", &rule, T0_NS).await);
    assert!(msg.contains("not a string record"), "{msg}");
    assert_eq!(raw(&redis, "HGET weir:{old} a"), "$2\r\ngc\r\n");
    // So with batching, whose MGET reads a hash as absent: a check, a peek, and the two
    // together in one batch (the check's record may not land where the hash is).
    let batched = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        .batch(8, Duration::from_millis(20))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let key = Key::new("old").unwrap();
    for cost in [1, 0] {
        let op = Op::Check { cost };
        corrupt(
            batched
                .apply(weir_core::ScopedKey::plain(&key), &rule, op, T0_NS)
                .await,
        );
    }
    let (a, b) = tokio::join!(
        batched.apply(
            weir_core::ScopedKey::plain(&key),
            &rule,
            Op::Check { cost: 0 },
            T0_NS
        ),
        batched.apply(
            weir_core::ScopedKey::plain(&key),
            &rule,
            Op::Check { cost: 1 },
            T0_NS
        )
    );
    corrupt(a);
    corrupt(b);
    assert_eq!(raw(&redis, "TYPE weir:{old}"), "+hash\r\n");

    raw(&redis, "SET weir:{string} hello");
    corrupt(check(&store, "string", &rule, T0_NS).await);
    assert_eq!(raw(&redis, "GET weir:{string}"), "$5\r\nhello\r\n");

    for (key, text) in [
        ("garbage", "gc 1700000000 99999999999 oops"),
        ("alien", "zz 1700000000 99999999999"),
        ("guard", "gc 1700000000 99999999999;1 2 5"),
        ("extra", "gc 1700000000 99999999999 5 6"),
    ] {
        raw(&redis, &format!("SET weir:{{{key}}} \"{text}\""));
        corrupt(check(&store, key, &rule, T0_NS).await);
        assert_eq!(
            raw(&redis, &format!("GET weir:{{{key}}}")),
            format!("${}\r\n{text}\r\n", text.len())
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_horizon_is_refused_clearly_and_changes_nothing() {
    let redis = RedisServer::start();
    let store = store(&redis, "weir");

    // A window beyond MAX_SPAN: refused before any round trip, naming the parameter.
    let month = Rule::sliding_window(
        100,
        Duration::from_secs(30 * 86_400),
        Duration::from_secs(86_400),
    )
    .unwrap();
    let err = check(&store, "month", &month, T0_NS).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "window is beyond the Redis store's horizon of 2^51 ns (about 26 days) or 2^51 units"
    );
    assert!(MAX_SPAN < Duration::from_secs(27 * 86_400));

    // Penalties that would push GCRA's state more than 2^52 ns ahead: refused, unchanged.
    let rule = Rule::gcra(1, Duration::from_secs(20 * 86_400), 1).unwrap();
    let key = Key::new("debt").unwrap();
    let penalty = Op::Penalty { n: 2 };
    assert!(store
        .apply(weir_core::ScopedKey::plain(&key), &rule, penalty, T0_NS)
        .await
        .is_ok());
    let before = raw(&redis, "GET weir:{debt}");
    let err = store
        .apply(weir_core::ScopedKey::plain(&key), &rule, penalty, T0_NS)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Invalid {
                param: "penalty",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("horizon"), "{err}");
    assert_eq!(raw(&redis, "GET weir:{debt}"), before);

    // A block or a lease beyond MAX_SPAN is refused too.
    let block = Op::Block {
        duration_ns: 30 * 86_400 * SEC,
    };
    let err = store
        .apply(weir_core::ScopedKey::plain(&key), &rule, block, T0_NS)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CheckError::Invalid {
                param: "duration",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn options_are_checked_when_the_store_is_built() {
    let bad = |b: weir_redis::RedisStoreBuilder| b.build().unwrap_err().to_string();
    let url = "redis://127.0.0.1:1";
    assert_eq!(
        bad(RedisStore::builder(url).prefix("a{b}")),
        "prefix: must not contain `{` or `}`"
    );
    assert_eq!(
        bad(RedisStore::builder(url).timeout(Duration::ZERO)),
        "timeout: must be greater than zero"
    );
    assert_eq!(
        bad(RedisStore::builder(url).batch(0, Duration::ZERO)),
        "batch.max_decisions: must be 1 to 1000"
    );
    assert_eq!(
        bad(RedisStore::builder("memcached://x:1")),
        "memcached://x:1: unknown scheme \
         (expected redis, rediss, unix, redis+unix, redis+cluster or redis+sentinel)"
    );
    // Nothing listens on port 1: building succeeds (no I/O), the first call fails clearly.
    let store = RedisStore::builder(url)
        .timeout(Duration::from_millis(200))
        .build()
        .unwrap();
    let err = store.ping().await.unwrap_err();
    assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
    assert!(
        err.to_string()
            .starts_with("store unavailable: redis://127.0.0.1:1: "),
        "{err}"
    );
}

#[test]
fn outside_a_tokio_runtime_calls_fail_without_panicking() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    // A call must fail at its first poll, so no executor is needed to see it.
    fn first_poll<F: Future>(fut: F) -> Poll<F::Output> {
        let mut fut = std::pin::pin!(fut);
        fut.as_mut().poll(&mut Context::from_waker(Waker::noop()))
    }
    for batch in [false, true] {
        let mut builder = RedisStore::builder("redis://127.0.0.1:1");
        if batch {
            builder = builder.batch(8, Duration::ZERO);
        }
        let store = builder.build().unwrap();
        let key = Key::new("k").unwrap();
        let rule = Rule::per_second(1).unwrap();
        let Poll::Ready(Err(CheckError::Store(StoreError::Unavailable(msg)))) =
            first_poll(store.apply(
                weir_core::ScopedKey::plain(&key),
                &rule,
                Op::Check { cost: 1 },
                T0_NS,
            ))
        else {
            panic!("expected an immediate error")
        };
        assert!(msg.contains("Tokio runtime"), "{msg}");
        assert!(matches!(
            first_poll(store.ping()),
            Poll::Ready(Err(StoreError::Unavailable(_)))
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_mixed_rules_and_operations_answers_as_single_calls_do() {
    // One batch (a wait gathers them) with several rules, algorithms and operations, some
    // on one key, some for the general path: each answers as an unbatched call does.
    let redis = RedisServer::start();
    let single = store(&redis, "one");
    let batched = RedisStore::builder(redis.url())
        .time_source(TimeSource::Process)
        .ttl_grace(Duration::ZERO)
        .prefix("many")
        .batch(64, Duration::from_millis(50))
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let gcra = Rule::gcra(2, Duration::from_secs(1), 2).unwrap();
    let window = Rule::fixed_window(1, Duration::from_secs(10)).unwrap();
    let leaky = Rule::leaky_bucket(3, 1, Duration::from_secs(1)).unwrap();
    let leases = Rule::concurrency(1).unwrap();
    let calls: Vec<(&str, &Rule, Op<'static>)> = vec![
        ("g", &gcra, Op::Check { cost: 1 }),
        ("w", &window, Op::Check { cost: 1 }),
        ("g", &gcra, Op::Check { cost: 1 }),
        ("l", &leaky, Op::Check { cost: 2 }),
        ("w", &window, Op::Check { cost: 1 }),
        (
            "c",
            &leases,
            Op::Acquire {
                holder: "a",
                ttl_ns: SEC,
            },
        ),
        ("g", &gcra, Op::Check { cost: 1 }),
        (
            "c",
            &leases,
            Op::Acquire {
                holder: "b",
                ttl_ns: SEC,
            },
        ),
        ("g", &gcra, Op::Penalty { n: 1 }),
        ("w", &window, Op::Inspect),
    ];
    let mut expected = Vec::new();
    for (key, rule, op) in &calls {
        let outcome = single
            .apply(
                weir_core::ScopedKey::plain(&Key::new(*key).unwrap()),
                rule,
                *op,
                T0_NS,
            )
            .await;
        expected.push(format!("{outcome:?}"));
    }
    let keys: Vec<Key> = calls
        .iter()
        .map(|(k, _, _)| Key::new(*k).unwrap())
        .collect();
    let fcall = || {
        let stats = raw(&redis, "INFO commandstats");
        let Some(calls) = stats.split("cmdstat_fcall:calls=").nth(1) else {
            return 0;
        };
        calls.split(',').next().unwrap().parse::<u64>().unwrap()
    };
    let before = fcall();
    // Polled together, each first in this order: they queue so and form one batch.
    let mut futures: Vec<_> = calls
        .iter()
        .zip(&keys)
        .map(|((_, rule, op), key)| {
            Box::pin(batched.apply(weir_core::ScopedKey::plain(key), rule, *op, T0_NS))
        })
        .collect();
    let mut got: Vec<Option<String>> = vec![None; futures.len()];
    std::future::poll_fn(|cx| {
        for (future, out) in futures.iter_mut().zip(got.iter_mut()) {
            if out.is_none() {
                if let std::task::Poll::Ready(outcome) = future.as_mut().poll(cx) {
                    *out = Some(format!("{outcome:?}"));
                }
            }
        }
        if got.iter().all(Option::is_some) {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await;
    let got: Vec<String> = got.into_iter().flatten().collect();
    assert_eq!(got, expected);
    assert!(expected.iter().any(|e| e.contains("allowed: false")));
    // One batch, one FCALL: the single calls above loaded the library, which holds every
    // entry point.
    assert_eq!(fcall() - before, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warm_up_rule_keeps_its_ramp_in_the_record_until_the_key_is_idle() {
    let redis = RedisServer::start();
    let store = store(&redis, "wu");
    // 10 per second, burst 1, warm-up 3 s from a third (X = 1.5 s).
    let rule = Rule::gcra(10, Duration::from_secs(1), 1)
        .unwrap()
        .with_warmup(Duration::from_secs(3), 3)
        .unwrap();
    let now = T0_NS;
    assert!(matches!(check(&store, "k", &rule, now).await, Ok(Outcome::Decision(d)) if d.allowed));
    // `gw b x t w`: the first unit cost about 3 intervals; w is its 100 ms of the ramp;
    // the record lives until the key has been full for W.
    let f = fields(&redis, "wu:{k}");
    assert_eq!(f[0], "gw");
    let base = f[1].parse::<u64>().unwrap() * SEC;
    let tat = base + f[3].parse::<u64>().unwrap();
    assert_eq!(tat - now, 293_333_334, "{f:?}");
    assert_eq!(f[4], "100000000");
    assert_eq!(base + f[2].parse::<u64>().unwrap(), tat + 3 * SEC);
    // Denied until the surcharge is paid, exactly.
    let Ok(Outcome::Decision(d)) = check(&store, "k", &rule, now).await else {
        panic!()
    };
    assert_eq!(d.retry_after, Duration::from_nanos(293_333_334));
    // Idle for W: the record is gone, and the key is cold again.
    assert!(
        matches!(check(&store, "k", &rule, tat + 3 * SEC).await, Ok(Outcome::Decision(d)) if d.allowed)
    );
    assert_eq!(fields(&redis, "wu:{k}")[4], "100000000");
}
