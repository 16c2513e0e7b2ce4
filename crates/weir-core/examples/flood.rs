//! A key flood against a bounded store: N distinct keys (10 M by default), each checked
//! once, arrive at a `MemoryStore` capped at C keys (1 M by default), as an attacker
//! making up one key per request would send them. Reports decisions per second and the
//! resident set every 10 % of the way, then what the store evicted and refused; with
//! `--lib governor`, the same flood into governor's keyed limiter (which has no cap) for
//! comparison. Used by BENCHMARKS.md; not a test (the flood's correctness is tested in
//! `store::memory::tests`).
//!
//! ```text
//! cargo run --release -p weir-core --example flood -- --keys 10000000 --capacity 1000000
//! cargo run --release -p weir-core --example flood -- --lib governor --keys 10000000
//! cargo run --release -p weir-core --example flood -- --text-keys   # the general path
//! ```

// An example: unwraps on bad input are the error message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use weir_core::{Clock, Key, MemoryStore, Op, Outcome, Rule, SystemClock};

/// Resident set size in bytes (`/proc/self/statm`, Linux, 4 KiB pages).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm (Linux)");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    let (mut lib, mut keys, mut capacity, mut text) =
        ("weir".to_string(), 10_000_000u64, 1usize << 20, false);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--lib" => lib = args.next().expect("--lib weir|governor"),
            "--keys" => keys = args.next().expect("--keys N").parse().unwrap(),
            "--capacity" => capacity = args.next().expect("--capacity N").parse().unwrap(),
            "--text-keys" => text = true,
            other => panic!("unknown argument {other}"),
        }
    }
    let clock = SystemClock::new();
    // 10 per hour, burst 10: a key checked once is not limited (evictable), and nothing
    // expires during the run, so every key stays live unless evicted.
    let rule = Rule::gcra(10, Duration::from_secs(3600), 10).unwrap();
    let weir = MemoryStore::builder().capacity(capacity).build();
    let quota = Quota::per_hour(NonZeroU32::new(10).unwrap());
    let governor: DefaultKeyedRateLimiter<u64> = RateLimiter::keyed(quota);
    let key_of = |k: u64| {
        if text {
            Key::new(format!("flood:{k}")).unwrap()
        } else {
            Key::from(k)
        }
    };

    let start_rss = rss_bytes();
    println!(
        "lib {lib}, {keys} distinct keys ({}), capacity {capacity}, rule GCRA 10/h burst 10",
        if text { "text" } else { "u64" }
    );
    println!(
        "| keys sent | M decisions/s (this step) | RSS MiB | RSS growth MiB | held | refused |"
    );
    println!("|---|---|---|---|---|---|");
    let step = (keys / 10).max(1);
    let mut refused = 0u64;
    let mut sent = 0u64;
    let run_start = clock.now_ns();
    while sent < keys {
        let t0 = clock.now_ns();
        let end = (sent + step).min(keys);
        for k in sent..end {
            if lib == "governor" {
                black_box(governor.check_key(&k).is_ok());
            } else {
                let outcome =
                    weir.apply_now(&key_of(k), &rule, Op::Check { cost: 1 }, clock.now_ns());
                match outcome {
                    Ok(Outcome::Decision(d)) => {
                        black_box(d.allowed);
                    }
                    _ => refused += 1,
                }
            }
        }
        let secs = (clock.now_ns() - t0) as f64 / 1e9;
        let rate = (end - sent) as f64 / secs / 1e6;
        sent = end;
        let rss = rss_bytes();
        let held = if lib == "governor" {
            governor.len()
        } else {
            weir.len()
        };
        println!(
            "| {sent} | {rate:.2} | {:.1} | {:.1} | {held} | {refused} |",
            mib(rss),
            mib(rss.saturating_sub(start_rss))
        );
    }
    let secs = (clock.now_ns() - run_start) as f64 / 1e9;
    println!(
        "total: {:.2} M decisions/s over {secs:.1} s",
        keys as f64 / secs / 1e6
    );
    if lib != "governor" {
        let stats = weir.stats();
        println!(
            "weir: held {}, capacity {}, evicted {}, refused {}, lock-free tables {:.1} MiB",
            stats.len,
            stats.capacity,
            stats.evictions,
            stats.refusals,
            mib(stats.lock_free_bytes as u64)
        );
    }
}
