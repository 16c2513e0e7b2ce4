//! A bounded load generator for Weir's network stores: `C` tasks share one
//! [`Limiter`] over a [`RedisStore`] (optionally batched) or a [`MemcachedStore`], optionally
//! behind weir-resilience's [`OverLimitCache`], and check keys drawn uniformly from `K` for a
//! fixed time. Used by `scripts/bench-stores`; not a test. Traffic goes only to 127.0.0.1.
//!
//! ```text
//! cargo run --release -p weir-redis --example load -- --store redis://127.0.0.1:6390 \
//!     --algorithm gcra --concurrency 64 --keys 100000 --duration 5 [--batch 64]
//! cargo run --release -p weir-redis --example load -- --store memcached://127.0.0.1:11213 \
//!     --algorithm fixed_window --concurrency 64 --keys 100000 --duration 5
//! # 10x overload through the over-limit cache: 100 keys at 10/s each, offered 10 000/s
//! cargo run --release -p weir-redis --example load -- --store redis://127.0.0.1:6390 \
//!     --algorithm gcra --concurrency 64 --keys 100 --rate 10000 --cache --duration 5
//! ```
//!
//! Every rule allows `--limit` (default 10) per `--per-ms` (default 1000), like the peer
//! harnesses (rate-limiter-flexible: 10 points per second; the Lua GCRA: 10/s, burst 10):
//! GCRA with burst = limit, a token bucket of capacity = rate = limit, a sliding log and a
//! fixed window of `limit` per window. Redis decides on its own clock (the production
//! default); memcached on this process's.
//!
//! Without `--rate` each task checks as fast as its answers come back (closed loop); with
//! `--rate R` the tasks together offer R checks per second (paced). A `--warmup` phase (not
//! measured) runs first. The whole process ends by itself: each task stops at its deadline,
//! every store call is bounded by the store's timeout, and a watchdog exits the process if
//! it is still running 30 s after the deadline.
//!
//! Prints one JSON line: decisions/s, p50/p99 latency of one check (µs), the allowed share,
//! errors, and for Redis the `FCALL`/`EVALSHA`/`EVAL` calls counted by `INFO commandstats` during
//! the measured phase (store calls per decision, Redis CPU µs per call and per decision);
//! for memcached the commands counted by `stats`; with `--cache`, the checks the over-limit
//! cache answered.

// An example: bad arguments end it with a message. It measures the wall time of real store
// calls, so it reads the machine's clock directly (not a decision's clock).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

use std::collections::HashMap;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use weir_core::{CheckError, Decisions, Key, Limiter, Op, Rule, Store, SystemClock};
use weir_memcached::MemcachedStore;
use weir_redis::RedisStore;
use weir_resilience::OverLimitCache;

/// Command-line options.
#[derive(Debug, Clone)]
struct Opts {
    store: String,
    algorithm: String,
    concurrency: usize,
    keys: u64,
    duration: Duration,
    warmup: Duration,
    batch: usize,
    batch_wait: Duration,
    limit: u64,
    per: Duration,
    rate: f64,
    cache: bool,
    workers: usize,
    timeout: Option<Duration>,
}

fn usage() -> ! {
    eprintln!(
        "usage: load --store redis://127.0.0.1:PORT|memcached://127.0.0.1:PORT \
         --algorithm gcra|token_bucket|sliding_log|fixed_window [--concurrency C] [--keys K] \
         [--duration S] [--warmup S] [--batch N] [--batch-wait-us U] [--limit L] [--per-ms MS] \
         [--rate R] [--cache] [--workers W] [--timeout-ms MS]"
    );
    std::process::exit(2)
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        store: String::new(),
        algorithm: "gcra".into(),
        concurrency: 1,
        keys: 100_000,
        duration: Duration::from_secs(5),
        warmup: Duration::from_secs(1),
        batch: 0,
        batch_wait: Duration::ZERO,
        limit: 10,
        per: Duration::from_secs(1),
        rate: 0.0,
        cache: false,
        workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
        timeout: None,
    };
    let mut args = std::env::args().skip(1);
    let secs = |v: String| Duration::from_secs_f64(v.parse().unwrap_or_else(|_| usage()));
    while let Some(arg) = args.next() {
        if arg == "--cache" {
            o.cache = true;
            continue;
        }
        let v = args.next().unwrap_or_else(|| usage());
        let num = |v: &str| v.parse::<u64>().unwrap_or_else(|_| usage());
        match arg.as_str() {
            "--store" => o.store = v,
            "--algorithm" => o.algorithm = v,
            "--concurrency" => o.concurrency = usize::try_from(num(&v)).unwrap(),
            "--keys" => o.keys = num(&v),
            "--duration" => o.duration = secs(v),
            "--warmup" => o.warmup = secs(v),
            "--batch" => o.batch = usize::try_from(num(&v)).unwrap(),
            "--batch-wait-us" => o.batch_wait = Duration::from_micros(num(&v)),
            "--limit" => o.limit = num(&v),
            "--per-ms" => o.per = Duration::from_millis(num(&v)),
            "--rate" => o.rate = v.parse().unwrap_or_else(|_| usage()),
            "--workers" => o.workers = usize::try_from(num(&v)).unwrap(),
            "--timeout-ms" => o.timeout = Some(Duration::from_millis(num(&v))),
            _ => usage(),
        }
    }
    let host = o
        .store
        .split("://")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or("");
    if host != "127.0.0.1" {
        eprintln!("refusing store {:?}: only 127.0.0.1 is allowed", o.store);
        std::process::exit(2);
    }
    if o.concurrency == 0 || o.keys == 0 || o.workers == 0 {
        usage();
    }
    o
}

fn rule(o: &Opts) -> Rule {
    match o.algorithm.as_str() {
        "gcra" => Rule::gcra(o.limit, o.per, o.limit),
        "token_bucket" => Rule::token_bucket(o.limit, o.limit, o.per),
        "sliding_log" => Rule::sliding_log(o.limit, o.per),
        "fixed_window" => Rule::fixed_window(o.limit, o.per),
        _ => usage(),
    }
    .expect("a valid rule")
}

/// What one task saw in the measured phase.
#[derive(Default)]
struct Tally {
    latencies_ns: Vec<u64>,
    allowed: u64,
    errors: u64,
    first_error: Option<String>,
}

/// When a task runs, and how fast.
#[derive(Debug, Clone, Copy)]
struct Plan {
    start: Instant,
    /// Checks are recorded from here on (before: warm-up).
    measure_from: Instant,
    end: Instant,
    /// Paced: one check per period per task; `None`: as fast as answers come back.
    period: Option<Duration>,
}

/// One task: checks keys until `end`, recording only after `measure_from`.
async fn worker<S: Store>(
    limiter: Arc<Limiter<S, SystemClock>>,
    keys: Arc<Vec<Key>>,
    rule: Arc<Rule>,
    seed: u64,
    plan: Plan,
) -> Tally {
    let Plan {
        start,
        measure_from,
        end,
        period,
    } = plan;
    let mut tally = Tally::default();
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let len = u64::try_from(keys.len()).unwrap();
    let mut n: u32 = 0;
    loop {
        if let Some(p) = period {
            // Paced: the n-th check of this task is due at start + n·period.
            let due = start + p * n;
            n = n.saturating_add(1);
            if due >= end {
                break;
            }
            tokio::time::sleep_until(due.into()).await;
        }
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = &keys[usize::try_from(x % len).unwrap()];
        let result = limiter.check(key, &rule, 1).await;
        if t0 < measure_from {
            continue;
        }
        let dt = t0.elapsed();
        tally
            .latencies_ns
            .push(u64::try_from(dt.as_nanos()).unwrap_or(u64::MAX));
        match result {
            Ok(d) => tally.allowed += u64::from(d.allowed),
            Err(e) => {
                tally.errors += 1;
                tally.first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    tally
}

/// The counters of a store server, by name (Redis `INFO commandstats`, memcached `stats`).
type Counters = HashMap<String, f64>;

/// Sends `request` to 127.0.0.1 `addr` and reads lines until one equals `last` (or EOF).
fn ask(addr: &str, request: &str, last: Option<&str>) -> std::io::Result<Vec<String>> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(request.as_bytes())?;
    let mut lines = Vec::new();
    for line in BufReader::new(s).lines() {
        let line = line?;
        let line = line.trim_end().to_string();
        let done = Some(line.as_str()) == last || (last.is_none() && line.is_empty());
        lines.push(line);
        if done {
            break;
        }
    }
    Ok(lines)
}

/// `INFO commandstats` of the Redis at `addr`: `<cmd>.calls` and `<cmd>.usec`.
fn redis_counters(addr: &str) -> Counters {
    // RESP inline command; the bulk reply ends with an empty line after its last field.
    let lines = ask(addr, "INFO commandstats\r\n", None).unwrap_or_default();
    let mut c = Counters::new();
    for line in lines {
        let Some(rest) = line.strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((cmd, fields)) = rest.split_once(':') else {
            continue;
        };
        for field in fields.split(',') {
            if let Some((k, v)) = field.split_once('=') {
                if k == "calls" || k == "usec" {
                    c.insert(format!("{cmd}.{k}"), v.parse().unwrap_or(0.0));
                }
            }
        }
    }
    c
}

/// memcached `stats`: every numeric `STAT name value`.
fn memcached_counters(addr: &str) -> Counters {
    let lines = ask(addr, "stats\r\n", Some("END")).unwrap_or_default();
    lines
        .iter()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some("STAT")).then_some(())?;
            let name = it.next()?;
            Some((name.to_string(), it.next()?.parse().ok()?))
        })
        .collect()
}

fn delta(after: &Counters, before: &Counters, names: &[&str]) -> f64 {
    names
        .iter()
        .map(|n| after.get(*n).unwrap_or(&0.0) - before.get(*n).unwrap_or(&0.0))
        .sum()
}

fn counters(o: &Opts, addr: &str) -> Counters {
    if o.store.starts_with("redis://") {
        redis_counters(addr)
    } else {
        memcached_counters(addr)
    }
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let last = sorted.len() - 1;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((q * sorted.len() as f64) as usize).min(last);
    sorted[i] as f64 / 1000.0
}

/// What [`run`] measured.
struct Outcome {
    tally: Tally,
    secs: f64,
    /// The server's counters when the measured phase began.
    before: Counters,
}

/// Store calls that reached the store behind the over-limit cache in the measured phase.
static APPLIES: AtomicU64 = AtomicU64::new(0);
/// When the measured phase begins.
static MEASURE_FROM: OnceLock<Instant> = OnceLock::new();

/// Counts the calls that reach `S` from the measured phase on.
struct Counting<S>(S);

impl<S: Store> Store for Counting<S> {
    fn apply(
        &self,
        key: &Key,
        rule: &Rule,
        op: Op<'_>,
        now_ns: u64,
    ) -> impl Future<Output = Result<weir_core::Outcome, CheckError>> + Send {
        if MEASURE_FROM.get().is_some_and(|m| Instant::now() >= *m) {
            APPLIES.fetch_add(1, Ordering::Relaxed);
        }
        self.0.apply(key, rule, op, now_ns)
    }

    fn check_all(
        &self,
        limits: &[(Key, Rule)],
        cost: u64,
        now_ns: u64,
    ) -> impl Future<Output = Result<Decisions, CheckError>> + Send {
        self.0.check_all(limits, cost, now_ns)
    }
}

async fn run<S: Store>(o: &Opts, store: S, addr: String) -> Outcome {
    let limiter = Arc::new(Limiter::new(store, SystemClock::new()));
    let keys: Arc<Vec<Key>> = Arc::new(
        (0..o.keys)
            .map(|i| Key::new(format!("k{i}")).unwrap())
            .collect(),
    );
    let rule = Arc::new(rule(o));
    // One check first: connects and loads the script before any clock starts.
    limiter
        .check(&keys[0], &rule, 1)
        .await
        .expect("store answers");
    let start = Instant::now();
    let measure_from = start + o.warmup;
    let end = measure_from + o.duration;
    MEASURE_FROM.set(measure_from).expect("one run per process");
    arm_watchdog(end);
    let snap_opts = o.clone();
    let before = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        tokio::task::spawn_blocking(move || counters(&snap_opts, &addr)).await
    });
    #[allow(clippy::cast_precision_loss)]
    let period = (o.rate > 0.0)
        .then(|| Duration::from_secs_f64(o.concurrency as f64 / o.rate))
        .filter(|p| !p.is_zero());
    let tasks: Vec<_> = (0..o.concurrency)
        .map(|i| {
            tokio::spawn(worker(
                Arc::clone(&limiter),
                Arc::clone(&keys),
                Arc::clone(&rule),
                u64::try_from(i).unwrap() + 1,
                Plan {
                    start,
                    measure_from,
                    end,
                    period,
                },
            ))
        })
        .collect();
    let mut tally = Tally::default();
    for t in tasks {
        let t = t.await.expect("task");
        tally.latencies_ns.extend(t.latencies_ns);
        tally.allowed += t.allowed;
        tally.errors += t.errors;
        tally.first_error = tally.first_error.or(t.first_error);
    }
    let secs = (Instant::now().max(end) - measure_from).as_secs_f64();
    let before = before.await.expect("task").expect("counters");
    Outcome {
        tally,
        secs,
        before,
    }
}

fn arm_watchdog(end: Instant) {
    static ARMED: AtomicBool = AtomicBool::new(false);
    if ARMED.swap(true, Ordering::SeqCst) {
        return;
    }
    std::thread::spawn(move || {
        std::thread::sleep(end.saturating_duration_since(Instant::now()) + Duration::from_secs(30));
        eprintln!("load: still running 30 s past its deadline; exiting");
        std::process::exit(3);
    });
}

fn main() {
    let o = parse_opts();
    let addr = o.store.split("://").nth(1).unwrap().to_string();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(o.workers)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let redis = o.store.starts_with("redis://");
    let out = rt.block_on(async {
        if redis {
            let mut b = RedisStore::builder(o.store.clone());
            if let Some(t) = o.timeout {
                b = b.timeout(t);
            }
            if o.batch > 0 {
                b = b.batch(o.batch, o.batch_wait);
            }
            let store = b.build().expect("redis store");
            if o.cache {
                run(&o, OverLimitCache::new(Counting(store)), addr.clone()).await
            } else {
                run(&o, store, addr.clone()).await
            }
        } else {
            let mut b = MemcachedStore::builder(&o.store);
            if let Some(t) = o.timeout {
                b = b.timeout(t);
            }
            let store = b.build().expect("memcached store");
            if o.cache {
                run(&o, OverLimitCache::new(Counting(store)), addr.clone()).await
            } else {
                run(&o, store, addr.clone()).await
            }
        }
    });
    let after = counters(&o, &addr);
    let (tally, secs, before) = (out.tally, out.secs, out.before);

    let mut lat = tally.latencies_ns;
    lat.sort_unstable();
    #[allow(clippy::cast_precision_loss)]
    let n = lat.len() as f64;
    let mut extra = String::new();
    if redis {
        let calls = delta(
            &after,
            &before,
            &["fcall.calls", "evalsha.calls", "eval.calls"],
        );
        let usec = delta(
            &after,
            &before,
            &["fcall.usec", "evalsha.usec", "eval.usec"],
        );
        extra.push_str(&format!(
            ",\"store_calls\":{calls},\"store_calls_per_decision\":{:.4},\
             \"redis_usec_per_call\":{:.2},\"redis_usec_per_decision\":{:.2}",
            calls / n.max(1.0),
            usec / calls.max(1.0),
            usec / n.max(1.0),
        ));
    } else {
        let cmds = delta(
            &after,
            &before,
            &[
                "cmd_get",
                "cmd_set",
                "incr_hits",
                "incr_misses",
                "decr_hits",
                "decr_misses",
                "delete_hits",
                "delete_misses",
                "cmd_touch",
            ],
        );
        extra.push_str(&format!(
            ",\"mc_commands\":{cmds},\"mc_commands_per_decision\":{:.3}",
            cmds / n.max(1.0)
        ));
    }
    if o.cache {
        #[allow(clippy::cast_precision_loss)]
        let applies = APPLIES.load(Ordering::Relaxed) as f64;
        extra.push_str(&format!(
            ",\"store_applies\":{applies},\"store_applies_per_decision\":{:.4}",
            applies / n.max(1.0)
        ));
    }
    #[allow(clippy::cast_precision_loss)]
    let allowed_pct = 100.0 * tally.allowed as f64 / n.max(1.0);
    println!(
        "{{\"store\":\"{}\",\"algorithm\":\"{}\",\"concurrency\":{},\"keys\":{},\"batch\":{},\
         \"batch_wait_us\":{},\"cache\":{},\"rate\":{},\"workers\":{},\"dur_s\":{:.3},\
         \"decisions\":{},\"decisions_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\
         \"allowed_pct\":{:.1},\"errors\":{}{extra}}}",
        if redis { "redis" } else { "memcached" },
        o.algorithm,
        o.concurrency,
        o.keys,
        o.batch,
        o.batch_wait.as_micros(),
        o.cache,
        o.rate,
        o.workers,
        secs,
        lat.len(),
        n / secs,
        quantile(&lat, 0.5),
        quantile(&lat, 0.99),
        allowed_pct,
        tally.errors,
    );
    if let Some(e) = tally.first_error {
        eprintln!("load: first error: {e}");
    }
    // The batch collector and pooled connections need not wind down.
    rt.shutdown_timeout(Duration::from_millis(200));
}
