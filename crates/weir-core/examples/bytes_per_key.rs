//! Memory per key: the resident-set growth (`/proc/self/statm`, Linux only) across inserting
//! N u64 keys into a fresh Weir [`MemoryStore`] or a fresh governor
//! `DefaultKeyedRateLimiter<u64>`, one library per process so neither sees the other's heap.
//! Quota on both sides: 10 per second, burst 10 (GCRA). Used by `scripts/bench`; not a test.
//!
//! ```text
//! cargo run --release -p weir-core --example bytes_per_key -- --lib weir --keys 1000000
//! cargo run --release -p weir-core --example bytes_per_key -- --lib governor --keys 1000000
//! ```
//!
//! Prints one JSON line: `{"lib":..,"keys":..,"len":..,"rss_delta_bytes":..,"bytes_per_key":..}`.

// An example: unwraps on bad input are the error message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::num::NonZeroU32;

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use weir_core::{Clock, Key, MemoryStore, Op, Record, Rule, SystemClock};

/// Resident set size in bytes (second field of `/proc/self/statm`, in pages).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("/proc/self/statm (Linux)");
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // 4 KiB pages (x86_64 Linux), as the governor harness assumes.
    pages * 4096
}

fn main() {
    let mut lib = String::from("weir");
    let mut keys: u64 = 1_000_000;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--lib" => lib = args.next().expect("--lib weir|governor"),
            "--keys" => keys = args.next().expect("--keys N").parse().unwrap(),
            other => panic!("unknown argument {other}; usage: --lib weir|governor --keys N"),
        }
    }

    let (before, after, len) = match lib.as_str() {
        "weir" => {
            let clock = SystemClock::new();
            let rule = Rule::per_second(10).unwrap();
            // Capacity above N, or inserts past 1 << 20 keys fail closed with `Full`.
            let capacity = usize::try_from(keys * 2).unwrap().max(1 << 20);
            let store = MemoryStore::builder().capacity(capacity).shards(64).build();
            let before = rss_bytes();
            for k in 0..keys {
                let outcome =
                    store.apply_now(&Key::from(k), &rule, Op::Check { cost: 1 }, clock.now_ns());
                black_box(outcome.unwrap());
            }
            let after = rss_bytes();
            (before, after, store.len())
        }
        "governor" => {
            let limiter: DefaultKeyedRateLimiter<u64> =
                RateLimiter::keyed(Quota::per_second(NonZeroU32::new(10).unwrap()));
            let before = rss_bytes();
            for k in 0..keys {
                let _ = black_box(limiter.check_key(&k));
            }
            let after = rss_bytes();
            (before, after, limiter.len())
        }
        other => panic!("--lib {other}: expected weir or governor"),
    };
    let delta = after.saturating_sub(before);
    println!(
        "{{\"lib\":\"{lib}\",\"keys\":{keys},\"len\":{len},\"rss_delta_bytes\":{delta},\"bytes_per_key\":{:.1},\"record_size\":{}}}",
        delta as f64 / keys as f64,
        if lib == "weir" { std::mem::size_of::<Record>() } else { 0 },
    );
}
