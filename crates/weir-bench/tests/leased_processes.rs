//! Leased mode across processes on one real Redis (single node, then a Cluster): four
//! `lease-load` processes hammer one key of a GCRA rule of 200 per hour at once. Together
//! they admit no more than the rule allows over the run plus one slice lifetime, every
//! unit the store granted is either admitted or still idle in a slice, and the store
//! granted nearly all of the burst.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking
#![allow(clippy::disallowed_methods)] // the run's wall-clock length widens the bound, never narrows it

use std::process::{Command, Stdio};
use std::time::Instant;

use weir_testkit::servers::{RedisCluster, RedisServer};

const PROCESSES: usize = 4;
const BURST: u64 = 200;

/// One process's JSON line, the fields this test reads.
#[derive(Debug)]
struct Run {
    allowed: u64,
    errors: u64,
    units_granted: u64,
    held_units: u64,
}

fn field(line: &str, name: &str) -> u64 {
    let at = line
        .find(&format!("\"{name}\":"))
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    line[at + name.len() + 3..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap()
}

fn run_processes(url: &str, prefix: &str) -> (Vec<Run>, u64) {
    let start = Instant::now();
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_lease-load"))
                .args(["--store", url, "--mode", "leased", "--algorithm", "gcra"])
                .args(["--limit", &BURST.to_string(), "--window", "3600"])
                .args(["--keys", "1", "--concurrency", "4", "--requests", "300"])
                .args(["--prefix", prefix, "--instances", &PROCESSES.to_string()])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("start lease-load")
        })
        .collect();
    let runs = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "lease-load failed: {stdout} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = stdout.lines().last().unwrap_or_default();
            Run {
                allowed: field(line, "allowed"),
                errors: field(line, "errors"),
                units_granted: field(line, "units_granted"),
                held_units: field(line, "held_units"),
            }
        })
        .collect();
    (runs, start.elapsed().as_secs() + 1)
}

fn check_bounds(runs: &[Run], secs: u64) {
    let allowed: u64 = runs.iter().map(|r| r.allowed).sum();
    let granted: u64 = runs.iter().map(|r| r.units_granted).sum();
    let held: u64 = runs.iter().map(|r| r.held_units).sum();
    assert_eq!(runs.iter().map(|r| r.errors).sum::<u64>(), 0, "{runs:?}");
    // 200 per hour: one unit per 18 s. A slice lives a tenth of the hour, at most 10 s.
    let bound = BURST + (secs + 10) / 18 + 1;
    assert!(allowed <= bound, "admitted {allowed} > {bound}: {runs:?}");
    // Every granted unit was admitted or sits in a slice (none expired within 10 s).
    assert_eq!(allowed + held, granted, "{runs:?}");
    // The store granted nearly all: a refused claim leaves less than half a slice (25).
    assert!(granted + 25 >= BURST, "granted only {granted}: {runs:?}");
}

#[test]
fn four_processes_share_one_key_on_one_redis() {
    let redis = RedisServer::start();
    let (runs, secs) = run_processes(&redis.url(), "single:");
    check_bounds(&runs, secs);
}

#[test]
fn four_processes_share_one_key_on_a_cluster() {
    let cluster = RedisCluster::start();
    let seeds: Vec<String> = cluster
        .nodes()
        .iter()
        .take(3)
        .map(|n| format!("127.0.0.1:{}", n.port()))
        .collect();
    let url = format!("redis+cluster://{}", seeds.join(","));
    let (runs, secs) = run_processes(&url, "cluster:");
    check_bounds(&runs, secs);
}
