//! CPU time per check of one hot key, one thread: Weir's keyed memory store (one 8-byte key,
//! the lock-free path), Weir's [`KeyedLimiter`] on one key, governor's keyed limiter on one
//! key, Weir's [`DirectLimiter`] and governor's direct limiter, every check
//! allowed (GCRA, 10^9 per second, burst 10^9, as the bench's `direct_allow`). Not a test,
//! and not the bench: on a shared machine a wall-clock bench counts the time other
//! processes take the core, so this reads the thread's own CPU time instead
//! (`/proc/thread-self/schedstat`, Linux, in ns), for comparing two builds of one path.
//!
//! ```text
//! cargo run --release -p weir-core --example hot_key_cpu -- [--checks 20000000] [--reps 5] \
//!     [--rule gcra|token_bucket|fixed_window]
//! ```
//!
//! `--rule` picks Weir's rule (the same quota: a token bucket of 10^9 refilled at 10^9 per
//! second, which decides as the GCRA; a fixed window of 10^8 per second, more than one thread
//! checks in a second, and small enough for the direct limiter's one word); governor's stays
//! GCRA.
//!
//! Prints, per subject, the CPU ns per check of each rep and their median.

// An example: unwraps on bad input are the error message; it measures time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::num::NonZeroU32;

use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use weir_core::{
    Clock, DirectLimiter, Key, KeyedLimiter, MemoryStore, Op, Outcome, Rule, SystemClock,
};

/// This thread's CPU time so far, in ns (first field of `/proc/thread-self/schedstat`).
fn cpu_ns() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat (Linux)");
    stat.split_whitespace().next().unwrap().parse().unwrap()
}

/// CPU ns per call of `check`, over `checks` calls; panics unless every check was allowed.
fn per_check(checks: u64, mut check: impl FnMut() -> bool) -> f64 {
    let start = cpu_ns();
    let mut allowed = 0u64;
    for _ in 0..checks {
        allowed += u64::from(check());
    }
    let spent = cpu_ns() - start;
    assert_eq!(black_box(allowed), checks, "every check is allowed");
    spent as f64 / checks as f64
}

fn main() {
    let (mut checks, mut reps, mut algorithm) = (20_000_000u64, 5usize, String::from("gcra"));
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--checks" => checks = args.next().expect("--checks N").parse().unwrap(),
            "--reps" => reps = args.next().expect("--reps N").parse().unwrap(),
            "--rule" => algorithm = args.next().expect("--rule gcra|token_bucket|fixed_window"),
            other => panic!("unknown argument {other}; usage: [--checks N] [--reps N] [--rule R]"),
        }
    }
    let second = std::time::Duration::from_secs(1);
    let rule = match algorithm.as_str() {
        "gcra" => Rule::per_second(1_000_000_000),
        "token_bucket" => Rule::token_bucket(1_000_000_000, 1_000_000_000, second),
        "fixed_window" => Rule::fixed_window(100_000_000, second),
        other => panic!("--rule {other}: expected gcra, token_bucket or fixed_window"),
    }
    .unwrap();
    let clock = SystemClock::new();
    let store = MemoryStore::default();
    let key = Key::from(42u64);
    let direct = DirectLimiter::new(rule).unwrap();
    let quota = Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap());
    let governor: DefaultDirectRateLimiter = RateLimiter::direct(quota);
    let keyed: KeyedLimiter<u64> = KeyedLimiter::new(rule).unwrap();
    let governor_keyed: DefaultKeyedRateLimiter<u64> = RateLimiter::keyed(quota);

    let mut results: Vec<(&str, Vec<f64>)> = vec![
        ("weir-store", Vec::new()),
        ("weir-keyed-limiter", Vec::new()),
        ("governor-keyed", Vec::new()),
        ("weir-direct", Vec::new()),
        ("governor-direct", Vec::new()),
    ];
    for _ in 0..reps {
        results[0].1.push(per_check(checks, || {
            let outcome = store.apply_now(
                black_box(&key),
                &rule,
                Op::Check { cost: 1 },
                clock.now_ns(),
            );
            matches!(outcome, Ok(Outcome::Decision(d)) if d.allowed)
        }));
        results[1].1.push(per_check(checks, || {
            keyed.check_now(black_box(&42)).is_ok_and(|d| d.allowed)
        }));
        results[2].1.push(per_check(checks, || {
            governor_keyed.check_key(black_box(&42)).is_ok()
        }));
        results[3].1.push(per_check(checks, || {
            direct.check_now().is_ok_and(|d| d.allowed)
        }));
        results[4]
            .1
            .push(per_check(checks, || governor.check().is_ok()));
    }
    for (name, mut ns) in results {
        let each: Vec<String> = ns.iter().map(|v| format!("{v:.1}")).collect();
        ns.sort_by(f64::total_cmp);
        println!(
            "{name}: median {:.1} ns CPU per check (reps: {})",
            ns[ns.len() / 2],
            each.join(" ")
        );
    }
}
