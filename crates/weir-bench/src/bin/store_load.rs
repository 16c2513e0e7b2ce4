//! `store-load`: a bounded load generator for Weir's network stores. `C` tasks share one
//! [`Limiter`] over a [`RedisStore`] (optionally batched) or a [`MemcachedStore`], optionally
//! behind weir-resilience's [`OverLimitCache`], and check keys drawn uniformly from `K` for a
//! fixed time. Used by `scripts/bench-stores` and `scripts/bench-redis-ab`; not a test.
//! Traffic goes only to 127.0.0.1.
//!
//! ```text
//! cargo build --release -p weir-bench --bin store-load
//! target/release/store-load --store redis://127.0.0.1:6390 \
//!     --algorithm gcra --concurrency 64 --keys 100000 --duration 5 [--batch 64]
//! target/release/store-load --store memcached://127.0.0.1:11213 \
//!     --algorithm fixed_window --concurrency 64 --keys 100000 --duration 5
//! # 10x overload through the over-limit cache: 100 keys at 10/s each, offered 10 000/s
//! target/release/store-load --store redis://127.0.0.1:6390 \
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
//! Prints one JSON line: decisions/s, p50/p99/p99.9/max latency of one check (µs), the allowed share,
//! errors, and for Redis the `FCALL`/`EVALSHA`/`EVAL` calls counted by `INFO commandstats` during
//! the measured phase (store calls per decision, Redis CPU µs per call and per decision);
//! for memcached the commands counted by `stats`; with `--cache`, the checks the over-limit
//! cache answered.

// A load generator measures the wall time of real store calls, so it reads the machine's
// clock directly (not a decision's clock).
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context as _};
use clap::builder::RangedU64ValueParser;
use clap::Parser;
use weir_bench::{Algorithm, Xorshift};
use weir_core::{CheckError, Decisions, Key, Limiter, Op, Rule, Store, SystemClock};
use weir_memcached::MemcachedStore;
use weir_redis::RedisStore;
use weir_resilience::OverLimitCache;

/// Checks keys on a Redis or memcached store on 127.0.0.1 and prints one JSON line.
#[derive(Debug, Clone, Parser)]
#[command(name = "store-load")]
struct Args {
    /// redis://127.0.0.1:PORT or memcached://127.0.0.1:PORT (only 127.0.0.1 is allowed)
    #[arg(long, value_parser = parse_store)]
    store: StoreUrl,
    /// The rule's algorithm
    #[arg(long, value_enum, default_value_t = Algorithm::Gcra)]
    algorithm: Algorithm,
    /// Tasks checking at once
    #[arg(long, default_value_t = 1, value_parser = at_least_one())]
    concurrency: usize,
    /// Keys, chosen uniformly at random per check
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    keys: u64,
    /// How long to measure, in seconds
    #[arg(long = "duration", default_value = "5", value_parser = parse_secs)]
    duration: Duration,
    /// How long to run first without measuring, in seconds
    #[arg(long, default_value = "1", value_parser = parse_secs)]
    warmup: Duration,
    /// Redis only: coalesce up to this many concurrent decisions into one script call (0: off)
    #[arg(long, default_value_t = 0)]
    batch: usize,
    /// Redis only: how long a batch waits for more decisions, in µs
    #[arg(long = "batch-wait-us", default_value_t = 0)]
    batch_wait_us: u64,
    /// Requests each key may make per --per-ms (GCRA: also the burst; token bucket: the capacity)
    #[arg(long, default_value_t = 10)]
    limit: u64,
    /// The rule's window, in milliseconds
    #[arg(long = "per-ms", default_value_t = 1000)]
    per_ms: u64,
    /// Checks per second offered by all tasks together (paced); 0: closed loop
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    rate: f64,
    /// Put weir-resilience's over-limit cache in front of the store
    #[arg(long)]
    cache: bool,
    /// Tokio worker threads (default: the machine's parallelism)
    #[arg(long, default_value_t = default_workers(), value_parser = at_least_one())]
    workers: usize,
    /// The store's timeout per call, in milliseconds (default: the store's own)
    #[arg(long = "timeout-ms")]
    timeout_ms: Option<u64>,
}

/// Which store `--store` names, and its address for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Redis,
    Memcached,
}

/// `--store`: a Redis or memcached URL on 127.0.0.1.
#[derive(Debug, Clone)]
struct StoreUrl {
    kind: Kind,
    url: String,
    /// `127.0.0.1:PORT`, where the server's counters are read.
    addr: String,
}

fn parse_store(url: &str) -> Result<StoreUrl, String> {
    let (kind, addr) = if let Some(addr) = url.strip_prefix("redis://") {
        (Kind::Redis, addr)
    } else if let Some(addr) = url.strip_prefix("memcached://") {
        (Kind::Memcached, addr)
    } else {
        return Err(format!(
            "{url:?} is neither redis://127.0.0.1:PORT nor memcached://127.0.0.1:PORT"
        ));
    };
    if addr.split(':').next() != Some("127.0.0.1") {
        return Err(format!("refusing store {url:?}: only 127.0.0.1 is allowed"));
    }
    Ok(StoreUrl {
        kind,
        url: url.to_string(),
        addr: addr.to_string(),
    })
}

fn parse_secs(value: &str) -> Result<Duration, String> {
    value
        .parse::<f64>()
        .ok()
        .and_then(|secs| Duration::try_from_secs_f64(secs).ok())
        .ok_or_else(|| format!("{value:?} is not a number of seconds"))
}

fn parse_rate(value: &str) -> Result<f64, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|rate| rate.is_finite() && *rate >= 0.0)
        .ok_or_else(|| format!("{value:?} is not a rate (checks per second, 0 or more)"))
}

fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZero::get)
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
    let mut keys_drawn = Xorshift::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
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
        let drawn = keys_drawn.below(keys.len() as u64);
        let Some(key) = usize::try_from(drawn).ok().and_then(|i| keys.get(i)) else {
            break;
        };
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

fn counters(store: &StoreUrl) -> Counters {
    match store.kind {
        Kind::Redis => redis_counters(&store.addr),
        Kind::Memcached => memcached_counters(&store.addr),
    }
}

fn quantile(sorted: &[u64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let i = ((q * sorted.len() as f64) as usize).min(last);
    sorted[i] as f64 / 1000.0
}

/// What [`run`] measured.
struct Measured {
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
        key: weir_core::ScopedKey<'_>,
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
        limits: weir_core::ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> impl Future<Output = Result<Decisions, CheckError>> + Send {
        self.0.check_all(limits, cost, now_ns)
    }
}

async fn run<S: Store>(args: &Args, store: S) -> anyhow::Result<Measured> {
    let limiter = Arc::new(Limiter::new(store, SystemClock::new()));
    let keys: Arc<Vec<Key>> = Arc::new(
        (0..args.keys)
            .map(|i| Key::new(format!("k{i}")))
            .collect::<Result<_, _>>()?,
    );
    let rule = Arc::new(
        args.algorithm
            .rule(args.limit, Duration::from_millis(args.per_ms))
            .context("--limit / --per-ms")?,
    );
    // One check first: connects and loads the script before any clock starts.
    let first = keys.first().context("no keys")?;
    limiter
        .check(first, &rule, 1)
        .await
        .with_context(|| format!("the store at {} does not answer", args.store.url))?;
    let start = Instant::now();
    let measure_from = start + args.warmup;
    let end = measure_from + args.duration;
    MEASURE_FROM
        .set(measure_from)
        .map_err(|_| anyhow!("one run per process"))?;
    arm_watchdog(end);
    let store_url = args.store.clone();
    let before = tokio::spawn(async move {
        tokio::time::sleep_until(measure_from.into()).await;
        tokio::task::spawn_blocking(move || counters(&store_url)).await
    });
    #[allow(clippy::cast_precision_loss)]
    // --rate 0 (closed loop) makes an infinite period, which is no period.
    let period = Duration::try_from_secs_f64(args.concurrency as f64 / args.rate)
        .ok()
        .filter(|p| !p.is_zero());
    let tasks: Vec<_> = (1..=args.concurrency as u64)
        .map(|seed| {
            tokio::spawn(worker(
                Arc::clone(&limiter),
                Arc::clone(&keys),
                Arc::clone(&rule),
                seed,
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
        let t = t.await.context("a load task")?;
        tally.latencies_ns.extend(t.latencies_ns);
        tally.allowed += t.allowed;
        tally.errors += t.errors;
        tally.first_error = tally.first_error.or(t.first_error);
    }
    let secs = (Instant::now().max(end) - measure_from).as_secs_f64();
    let before = before
        .await
        .context("the counters task")?
        .context("reading the counters")?;
    Ok(Measured {
        tally,
        secs,
        before,
    })
}

fn arm_watchdog(end: Instant) {
    static ARMED: AtomicBool = AtomicBool::new(false);
    if ARMED.swap(true, Ordering::SeqCst) {
        return;
    }
    std::thread::spawn(move || {
        std::thread::sleep(end.saturating_duration_since(Instant::now()) + Duration::from_secs(30));
        eprintln!("store-load: still running 30 s past its deadline; exiting");
        std::process::exit(3);
    });
}

/// Builds the store `--store` names (with `--timeout-ms`, `--batch`, `--cache`) and runs.
async fn build_and_run(args: &Args) -> anyhow::Result<Measured> {
    let url = args.store.url.as_str();
    match args.store.kind {
        Kind::Redis => {
            let mut b = RedisStore::builder(url);
            if let Some(ms) = args.timeout_ms {
                b = b.timeout(Duration::from_millis(ms));
            }
            if args.batch > 0 {
                b = b.batch(args.batch, Duration::from_micros(args.batch_wait_us));
            }
            let store = b.build().with_context(|| format!("--store {url}"))?;
            if args.cache {
                run(args, OverLimitCache::new(Counting(store))).await
            } else {
                run(args, store).await
            }
        }
        Kind::Memcached => {
            let mut b = MemcachedStore::builder(url);
            if let Some(ms) = args.timeout_ms {
                b = b.timeout(Duration::from_millis(ms));
            }
            let store = b.build().with_context(|| format!("--store {url}"))?;
            if args.cache {
                run(args, OverLimitCache::new(Counting(store))).await
            } else {
                run(args, store).await
            }
        }
    }
}

/// The store's own work in the measured phase, as the JSON fields after the common ones.
#[allow(clippy::cast_precision_loss)]
fn store_fields(args: &Args, after: &Counters, before: &Counters, decisions: f64) -> String {
    let mut extra = match args.store.kind {
        Kind::Redis => {
            let calls = delta(
                after,
                before,
                &["fcall.calls", "evalsha.calls", "eval.calls"],
            );
            let usec = delta(after, before, &["fcall.usec", "evalsha.usec", "eval.usec"]);
            format!(
                ",\"store_calls\":{calls},\"store_calls_per_decision\":{:.4},\
                 \"redis_usec_per_call\":{:.2},\"redis_usec_per_decision\":{:.2}",
                calls / decisions.max(1.0),
                usec / calls.max(1.0),
                usec / decisions.max(1.0),
            )
        }
        Kind::Memcached => {
            let cmds = delta(
                after,
                before,
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
            format!(
                ",\"mc_commands\":{cmds},\"mc_commands_per_decision\":{:.3}",
                cmds / decisions.max(1.0)
            )
        }
    };
    if args.cache {
        let applies = APPLIES.load(Ordering::Relaxed) as f64;
        extra.push_str(&format!(
            ",\"store_applies\":{applies},\"store_applies_per_decision\":{:.4}",
            applies / decisions.max(1.0)
        ));
    }
    extra
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.workers)
        .enable_all()
        .build()
        .context("the tokio runtime")?;
    let out = rt.block_on(build_and_run(&args))?;
    let after = counters(&args.store);
    let Measured {
        tally,
        secs,
        before,
    } = out;

    let mut lat = tally.latencies_ns;
    lat.sort_unstable();
    #[allow(clippy::cast_precision_loss)]
    let n = lat.len() as f64;
    let extra = store_fields(&args, &after, &before, n);
    #[allow(clippy::cast_precision_loss)]
    let allowed_pct = 100.0 * tally.allowed as f64 / n.max(1.0);
    println!(
        "{{\"store\":\"{}\",\"algorithm\":\"{}\",\"concurrency\":{},\"keys\":{},\"batch\":{},\
         \"batch_wait_us\":{},\"cache\":{},\"rate\":{},\"workers\":{},\"dur_s\":{:.3},\
         \"decisions\":{},\"decisions_per_s\":{:.0},\"p50_us\":{:.1},\"p99_us\":{:.1},\
         \"p999_us\":{:.1},\"max_us\":{:.1},\"allowed_pct\":{:.1},\"errors\":{}{extra}}}",
        match args.store.kind {
            Kind::Redis => "redis",
            Kind::Memcached => "memcached",
        },
        args.algorithm.name(),
        args.concurrency,
        args.keys,
        args.batch,
        args.batch_wait_us,
        args.cache,
        args.rate,
        args.workers,
        secs,
        lat.len(),
        n / secs,
        quantile(&lat, 0.5),
        quantile(&lat, 0.99),
        quantile(&lat, 0.999),
        quantile(&lat, 1.0),
        allowed_pct,
        tally.errors,
    );
    if let Some(e) = tally.first_error {
        eprintln!("store-load: first error: {e}");
    }
    // The batch collector and pooled connections need not wind down.
    rt.shutdown_timeout(Duration::from_millis(200));
    Ok(())
}
