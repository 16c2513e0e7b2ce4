//! Real time on the store clock (`TIME` inside the script), where no test controls time.
//!
//! Each decision runs at an instant `exec` this test cannot see, but can bracket: it reads
//! Redis's `TIME` on a separate connection just before sending the call (`lo`) and just
//! after the reply (`hi`), so `lo <= exec <= hi` (the same clock, causally ordered). Every
//! check below uses the bracket in the direction that can only *under*-state a promise's
//! slack, so a failure is a definite violation, never a measurement artefact:
//!
//! - sliding log (`L` per `W`): any `L + 1` consecutive admitted units span `hi_j - lo_i >= W`;
//! - GCRA, token bucket, leaky bucket (`B` + one per `T`): units admitted between two
//!   decisions `i..=j` are at most `B + (hi_j - lo_i) / T`;
//! - leaky queue: departures (`exec + delay`) of consecutive admitted units are `T` apart;
//! - fixed window: at most `L` among decisions whose whole bracket lies in one aligned window;
//! - `retry_after` and the TTL: a retry sent before `lo + retry_after` is denied, one sent
//!   after `hi + retry_after` is allowed, and the key exists until `lo + reset_after` and is
//!   gone after `hi + reset_after + 1 ms`.
//!
//! What this proves: the scripts read `TIME` correctly (seconds and microseconds into ns),
//! align windows to the epoch from it, never admit more than the algorithm's promise in real
//! time, answer `retry_after` and set TTLs on the same clock, and ignore the `now_ns` the
//! caller passes (every call here passes 0). What it cannot prove: exactness below the
//! bracket width (tens of microseconds); the manual-clock conformance suites prove that.
//! Real time must pass here, so this file sleeps (a few ms at a time, about 5 s in all).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use redis::aio::MultiplexedConnection;
use weir_core::{Decision, Key, Op, Outcome, Rule, Store};
use weir_redis::{RedisStore, TimeSource};
use weir_testkit::servers::RedisServer;

const MS: u64 = 1_000_000;

/// Redis's clock, read on a connection of its own.
struct Probe(MultiplexedConnection);

impl Probe {
    async fn new(redis: &RedisServer) -> Self {
        let client = redis::Client::open(redis.url()).unwrap();
        Self(client.get_multiplexed_async_connection().await.unwrap())
    }

    async fn time_ns(&mut self) -> u64 {
        let (s, us): (u64, u64) = redis::cmd("TIME").query_async(&mut self.0).await.unwrap();
        s * 1_000_000_000 + us * 1_000
    }

    async fn query(&mut self, cmd: &str, key: &[u8]) -> i64 {
        redis::cmd(cmd)
            .arg(key)
            .query_async(&mut self.0)
            .await
            .unwrap()
    }
}

/// One decision and the bracket of its execution instant.
#[derive(Debug, Clone, Copy)]
struct Timed {
    lo: u64,
    hi: u64,
    cost: u64,
    d: Decision,
}

async fn timed(store: &RedisStore, probe: &mut Probe, key: &Key, rule: &Rule, op: Op<'_>) -> Timed {
    let cost = match op {
        Op::Check { cost } => cost,
        _ => 1,
    };
    let lo = probe.time_ns().await;
    // now_ns = 0: the store clock must ignore it.
    let outcome = store
        .apply(weir_core::ScopedKey::plain(key), rule, op, 0)
        .await
        .unwrap();
    let hi = probe.time_ns().await;
    let Outcome::Decision(d) = outcome else {
        panic!("{outcome:?}")
    };
    Timed { lo, hi, cost, d }
}

fn ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap()
}

/// A small deterministic generator, so a failure replays.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (self.0 >> 33) % below
    }
}

/// Sequential traffic on one key for `for_ns` of Redis time: costs 1 or 2, gaps of 0-3 ms.
async fn traffic(
    store: &RedisStore,
    probe: &mut Probe,
    key: &Key,
    rule: &Rule,
    for_ns: u64,
) -> Vec<Timed> {
    let mut rng = Lcg(u64::from(key.as_bytes()[0]));
    let start = probe.time_ns().await;
    let mut trace = Vec::new();
    while probe.time_ns().await < start + for_ns {
        let cost = 1 + rng.next(2).min(rule.limit() - 1);
        trace.push(timed(store, probe, key, rule, Op::Check { cost }).await);
        let gap = rng.next(4);
        if gap > 0 {
            tokio::time::sleep(Duration::from_millis(gap)).await;
        }
    }
    trace
}

fn admitted(trace: &[Timed]) -> Vec<Timed> {
    trace.iter().copied().filter(|t| t.d.allowed).collect()
}

/// Sliding log: any run of admitted units above `limit` spans at least the window.
fn log_holds(trace: &[Timed], limit: u64, window_ns: u64) {
    let hits = admitted(trace);
    for i in 0..hits.len() {
        let mut units = 0;
        for j in i..hits.len() {
            units += hits[j].cost;
            if units > limit {
                assert!(
                    hits[j].hi - hits[i].lo >= window_ns,
                    "{units} units within {} ns < window {window_ns} ns",
                    hits[j].hi - hits[i].lo
                );
                break;
            }
        }
    }
}

/// Buckets and GCRA: units admitted in `i..=j` at most `burst + (hi_j - lo_i) / interval`.
fn bucket_holds(trace: &[Timed], burst: u64, interval_ns: u64) {
    let hits = admitted(trace);
    for i in 0..hits.len() {
        let mut units = 0;
        for j in i..hits.len() {
            units += hits[j].cost;
            let span = hits[j].hi - hits[i].lo;
            assert!(
                units * interval_ns <= burst * interval_ns + span,
                "{units} units within {span} ns: above {burst} + one per {interval_ns} ns"
            );
        }
    }
}

/// Leaky queue: departures of admitted units leave at least one interval per unit apart.
fn queue_holds(trace: &[Timed], interval_ns: u64) {
    let hits = admitted(trace);
    for w in hits.windows(2) {
        let (a, b) = (w[0], w[1]);
        let gap = (b.hi + ns(b.d.delay)) - (a.lo + ns(a.d.delay));
        assert!(
            gap >= a.cost * interval_ns,
            "departures {gap} ns apart, less than {} units of {interval_ns} ns",
            a.cost
        );
    }
}

/// Fixed window: at most `limit` units among decisions bracketed inside one window.
fn fixed_holds(trace: &[Timed], limit: u64, window_ns: u64) {
    let mut per_window = std::collections::HashMap::<u64, u64>::new();
    for t in admitted(trace) {
        if t.lo / window_ns == t.hi / window_ns {
            *per_window.entry(t.lo / window_ns).or_default() += t.cost;
        }
    }
    for (w, units) in per_window {
        assert!(units <= limit, "{units} units in window {w}, limit {limit}");
    }
}

fn store(redis: &RedisServer) -> RedisStore {
    RedisStore::builder(redis.url())
        .time_source(TimeSource::Store)
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_algorithms_keep_their_promise_on_the_store_clock() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let mut probe = Probe::new(&redis).await;
    let run = 500 * MS;
    let ms = Duration::from_millis;

    let log = Rule::sliding_log(5, ms(50)).unwrap();
    let trace = traffic(&store, &mut probe, &Key::new("a:log").unwrap(), &log, run).await;
    log_holds(&trace, 5, 50 * MS);

    for (name, rule, burst) in [
        ("b:gcra", Rule::gcra(100, ms(1_000), 3).unwrap(), 3),
        ("c:token", Rule::token_bucket(3, 100, ms(1_000)).unwrap(), 3),
        ("d:leaky", Rule::leaky_bucket(3, 100, ms(1_000)).unwrap(), 3),
    ] {
        let trace = traffic(&store, &mut probe, &Key::new(name).unwrap(), &rule, run).await;
        assert!(trace.iter().any(|t| !t.d.allowed), "{name}: never limited");
        bucket_holds(&trace, burst, 10 * MS);
    }

    let queue = Rule::leaky_queue(100, ms(1_000), 4, Duration::MAX).unwrap();
    let trace = traffic(
        &store,
        &mut probe,
        &Key::new("e:queue").unwrap(),
        &queue,
        run,
    )
    .await;
    assert!(
        trace.iter().any(|t| !t.d.delay.is_zero()),
        "queue: never delayed"
    );
    queue_holds(&trace, 10 * MS);

    let fixed = Rule::fixed_window(4, ms(40)).unwrap();
    let trace = traffic(
        &store,
        &mut probe,
        &Key::new("f:fixed").unwrap(),
        &fixed,
        run,
    )
    .await;
    fixed_holds(&trace, 4, 40 * MS);
}

/// Waits until Redis's clock reads at least `at_ns`.
async fn until(probe: &mut Probe, at_ns: u64) {
    loop {
        let now = probe.time_ns().await;
        if now >= at_ns {
            return;
        }
        tokio::time::sleep(Duration::from_nanos((at_ns - now).min(5 * MS))).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_and_the_ttl_follow_the_store_clock() {
    let redis = RedisServer::start();
    retry_and_ttl(&redis, &store(&redis)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_calls_follow_the_store_clock_too() {
    let redis = RedisServer::start();
    let store = RedisStore::builder(redis.url())
        .time_source(TimeSource::Store)
        .timeout(Duration::from_secs(2))
        .batch(8, Duration::ZERO)
        .build()
        .unwrap();
    retry_and_ttl(&redis, &store).await;
}

async fn retry_and_ttl(redis: &RedisServer, store: &RedisStore) {
    let mut probe = Probe::new(redis).await;
    let rule = Rule::gcra(10, Duration::from_millis(1_000), 2).unwrap(); // one per 100 ms
    let key = Key::new("retry").unwrap();
    let name = b"weir:{retry}";

    timed(store, &mut probe, &key, &rule, Op::Check { cost: 2 }).await;
    let denied = timed(store, &mut probe, &key, &rule, Op::Check { cost: 1 }).await;
    assert!(!denied.d.allowed);
    let retry = ns(denied.d.retry_after);
    assert!(retry > 90 * MS && retry <= 100 * MS, "{retry}");

    // The key lives while the state is not fresh, with a TTL of reset_after (ms, rounded up).
    let pttl = probe.query("PTTL", name).await;
    let after = probe.time_ns().await;
    let reset_ms = i64::try_from(ns(denied.d.reset_after).div_ceil(MS)).unwrap();
    let spent_ms = i64::try_from((after - denied.lo).div_ceil(MS)).unwrap();
    assert!(
        pttl <= reset_ms && pttl >= reset_ms - spent_ms - 1,
        "pttl {pttl} reset {reset_ms}"
    );

    // Retried at once (well before lo + retry): still denied.
    let again = timed(store, &mut probe, &key, &rule, Op::Check { cost: 1 }).await;
    assert!(again.hi < denied.lo + retry);
    assert!(!again.d.allowed);

    // Retried once hi + retry has passed on Redis's clock: allowed.
    until(&mut probe, denied.hi + retry).await;
    let later = timed(store, &mut probe, &key, &rule, Op::Check { cost: 1 }).await;
    assert!(later.d.allowed, "{later:?}");

    // Idle: the key exists until it is fresh, and is gone 2 ms after: the TTL is rounded up
    // to a millisecond, and Redis expires a key only once its clock is past the expiry
    // millisecond (strictly), which under load can be the very millisecond this probe reads.
    let fresh_at = later.lo + ns(later.d.reset_after);
    if probe.time_ns().await < fresh_at {
        assert_eq!(probe.query("EXISTS", name).await, 1);
    }
    until(&mut probe, later.hi + ns(later.d.reset_after) + 2 * MS).await;
    assert_eq!(
        probe.query("EXISTS", name).await,
        0,
        "the key outlived its state"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_expire_on_the_store_clock() {
    let redis = RedisServer::start();
    let store = store(&redis);
    let mut probe = Probe::new(&redis).await;
    let rule = Rule::concurrency(1).unwrap();
    let key = Key::new("lease").unwrap();
    let ttl_ns = 60 * MS;
    let lease = |holder| Op::Acquire { holder, ttl_ns };

    let first = timed(&store, &mut probe, &key, &rule, lease("a")).await;
    assert!(first.d.allowed);
    let denied = timed(&store, &mut probe, &key, &rule, lease("b")).await;
    assert!(!denied.d.allowed);
    assert!(ns(denied.d.retry_after) <= ttl_ns);
    until(&mut probe, first.hi + ttl_ns).await;
    let taken = timed(&store, &mut probe, &key, &rule, lease("b")).await;
    assert!(taken.d.allowed, "the expired lease still held its slot");
}
