//! `lease-load`: drives one rule on a real Redis through Weir's `LeasedStore`, in exact or
//! leased mode, and prints one JSON line: decisions per second, what was admitted, the
//! store calls per decision and the units left idle in slices. Closed loop (each task
//! checks as fast as answers come) by default, or open loop at `--offered` decisions per
//! second in total (the overload benchmark). `scripts/bench-leases` runs it beside
//! rate-limiter-flexible; `tests/leased_processes.rs` runs several at once on one Redis.
//!
//! ```text
//! lease-load --store redis://127.0.0.1:6390 --mode leased --algorithm fixed_window \
//!            --limit 600 --window 60 --concurrency 64 --keys 100000 --secs 3
//! ```

// A load generator measures wall time: its own runs' length and pacing, never a decision.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, ValueEnum};
use weir_bench::{Algorithm, Xorshift};
use weir_core::{Clock, Key, Op, Outcome, Rule, Store, SystemClock};
use weir_redis::RedisStore;
use weir_resilience::{LeaseConfig, LeasedStore};

/// Exact or leased decisions on one rule over a real Redis.
#[derive(Debug, Parser)]
struct Args {
    /// The Redis URL (any form `--store` of `weir serve` takes: redis://, redis+cluster://, …)
    #[arg(long, default_value = "redis://127.0.0.1:6390")]
    store: String,
    /// exact: one store call per decision; leased: slices claimed ahead
    #[arg(long, value_enum, default_value_t = Mode::Leased)]
    mode: Mode,
    /// The rule's algorithm
    #[arg(long, value_enum, default_value_t = Algorithm::FixedWindow)]
    algorithm: Algorithm,
    /// Requests per window (GCRA: also the burst; token bucket: the capacity)
    #[arg(long, default_value_t = 600)]
    limit: u64,
    /// The window in seconds
    #[arg(long, default_value_t = 60)]
    window: u64,
    /// Tasks checking at once
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Keys, chosen uniformly at random per check
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// How long to measure, in seconds (ignored with --requests)
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// How long to run first without measuring, in seconds (slices grow with a key's demand;
    /// ignored with --requests)
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Checks per task instead of a duration
    #[arg(long)]
    requests: Option<u64>,
    /// Decisions per second offered in total (open loop); without it, closed loop
    #[arg(long)]
    offered: Option<f64>,
    /// A slice holds at most limit / this (LeaseConfig::limit_fraction)
    #[arg(long, default_value_t = LeaseConfig::default().limit_fraction)]
    limit_fraction: u64,
    /// How many instances share each limit (LeaseConfig::instances: an overloaded key's
    /// slice is at most this instance's share)
    #[arg(long, default_value_t = 1)]
    instances: u64,
    /// Prefix of every Redis key (runs that must not share records use different ones)
    #[arg(long, default_value = "weir-bench:")]
    prefix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Mode {
    Exact,
    Leased,
}

fn rule(args: &Args) -> anyhow::Result<Rule> {
    let rule = args
        .algorithm
        .rule(args.limit, Duration::from_secs(args.window))?;
    Ok(match args.mode {
        Mode::Exact => rule,
        Mode::Leased => rule.leased()?,
    })
}

#[derive(Debug, Default)]
struct Totals {
    decisions: AtomicU64,
    allowed: AtomicU64,
    errors: AtomicU64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let rule = rule(&args)?;
    let redis = RedisStore::builder(args.store.as_str())
        .prefix(args.prefix.as_str())
        .timeout(Duration::from_secs(2))
        .build()
        .with_context(|| format!("--store {}", args.store))?;
    let config = LeaseConfig {
        limit_fraction: args.limit_fraction,
        instances: args.instances,
        ..LeaseConfig::default()
    };
    let store = Arc::new(LeasedStore::new(redis, config));
    let clock = SystemClock::new();
    let totals = Arc::new(Totals::default());
    let start = Instant::now();
    let warmup = match args.requests {
        Some(_) => Duration::ZERO,
        None => Duration::from_secs_f64(args.warmup),
    };
    let deadline = start + warmup + Duration::from_secs_f64(args.secs);
    let period = args
        .offered
        .map(|rate| Duration::from_secs_f64(args.concurrency as f64 / rate.max(1e-9)));
    let mut tasks = Vec::with_capacity(args.concurrency);
    for task in 0..args.concurrency {
        let (store, clock, totals) = (store.clone(), clock, totals.clone());
        let (keys, requests) = (args.keys.max(1), args.requests);
        tasks.push(tokio::spawn(async move {
            let mut keys_drawn = Xorshift::new(0x9E37_79B9_7F4A_7C15u64 ^ (task as u64 + 1));
            let mut n = 0u64;
            loop {
                match requests {
                    Some(max) if n >= max => break,
                    None if Instant::now() >= deadline => break,
                    _ => {}
                }
                if let Some(period) = period {
                    let due = start + period.mul_f64(n as f64);
                    tokio::time::sleep_until(due.into()).await;
                }
                let key = Key::from(keys_drawn.below(keys));
                let op = Op::Check { cost: 1 };
                match store
                    .apply(weir_core::ScopedKey::plain(&key), &rule, op, clock.now_ns())
                    .await
                {
                    Ok(Outcome::Decision(d)) => {
                        totals
                            .allowed
                            .fetch_add(u64::from(d.allowed), Ordering::Relaxed);
                    }
                    _ => {
                        totals.errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                totals.decisions.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        }));
    }
    // What the warm-up did is subtracted from the totals.
    tokio::time::sleep(warmup).await;
    let measured_from = Instant::now();
    let before = (
        totals.decisions.load(Ordering::Relaxed),
        totals.allowed.load(Ordering::Relaxed),
        store.stats(),
    );
    for task in tasks {
        task.await?;
    }
    let secs = measured_from.elapsed().as_secs_f64();
    let stats = store.stats();
    let decisions = totals.decisions.load(Ordering::Relaxed) - before.0;
    let allowed = totals.allowed.load(Ordering::Relaxed) - before.1;
    let calls = match args.mode {
        Mode::Exact => decisions,
        Mode::Leased => stats.claims - before.2.claims,
    };
    let units_granted = stats.units_granted - before.2.units_granted;
    println!(
        "{{\"mode\":\"{:?}\",\"algorithm\":\"{}\",\"limit\":{},\"window_s\":{},\"concurrency\":{},\
         \"keys\":{},\"offered\":{},\"warmup_s\":{},\"secs\":{secs:.3},\"decisions\":{decisions},\
         \"decisions_per_s\":{:.0},\"allowed\":{},\"errors\":{},\"store_calls\":{calls},\
         \"calls_per_decision\":{:.5},\"units_granted\":{},\"held_units\":{}}}",
        args.mode,
        args.algorithm.name(),
        args.limit,
        args.window,
        args.concurrency,
        args.keys,
        args.offered.unwrap_or(0.0),
        warmup.as_secs_f64(),
        decisions as f64 / secs,
        allowed,
        totals.errors.load(Ordering::Relaxed),
        calls as f64 / (decisions.max(1)) as f64,
        units_granted,
        store.held_units(clock.now_ns()),
    );
    Ok(())
}
