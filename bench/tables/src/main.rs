//! Side-by-side bench of concurrent tables for one GCRA decision per check (issue 11).
//!
//! Subjects: Weir's `MemoryStore` (its own lock-free table of 16-byte `[key | TAT]` slots),
//! dashmap 6 `DashMap<u64, AtomicU64>`, papaya `HashMap<u64, AtomicU64>` (a pin guard per
//! check), scc `HashMap<u64, u64>` (updated in place under its bucket lock), and governor's
//! keyed limiter (dashmap inside) as the reference; `dashmap-sip` is the same dashmap with
//! std's SipHash, governor's hasher. The three bare tables run GCRA on a u64
//! TAT inline, as governor does: allowed iff `max(tat, now) + T - now <= tau`, then the new
//! TAT is stored by CAS (dashmap, papaya) or in place (scc).
//!
//! The quota always allows (1e9 per second, burst 1e9: T = 1 ns, tau = 1 s), so every check
//! does the same work (a read, a decision, a write); the share allowed is printed and checked.
//! Every subject but governor reads Weir's `SystemClock::now_ns()` once per check; governor
//! reads its own (quanta) clock. The bare tables hash with foldhash (Weir's hasher), so the
//! comparison is of table designs, not hashers; governor keeps its default.
//!
//! ```text
//! cargo run --release                      # everything, a markdown table at the end
//! cargo run --release -- --mem weir        # one memory probe (what the full run spawns)
//! ```

use std::hint::black_box;
use std::num::NonZeroU32;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use weir_core::{Clock, Key, MemoryStore, Op, Outcome, Rule, SystemClock};

/// GCRA emission interval: 1e9 per second.
const T_NS: u64 = 1;
/// GCRA delay tolerance: burst 1e9 × T.
const TAU_NS: u64 = 1_000_000_000;
/// Keys in the uniform scenario and in the memory probe.
const KEYS: u64 = 1_000_000;
/// Checks per thread in one run.
const ITERS_UNIFORM: u64 = 3_000_000;
const ITERS_HOT: u64 = 5_000_000;
/// Runs per (table, scenario, threads); the median is reported.
const RUNS: usize = 5;
/// Processes per table for the memory probe; the median is reported.
const MEM_PROCS: usize = 3;
const HOT_KEY: u64 = 42;

const TABLES: [&str; 6] = ["weir", "dashmap", "dashmap-sip", "papaya", "scc", "governor"];

/// The GCRA step on a u64 TAT (governor's arithmetic): the new TAT if allowed.
#[inline(always)]
fn gcra(tat: u64, now: u64) -> Option<u64> {
    let t0 = tat.max(now);
    if t0 + T_NS - now <= TAU_NS {
        Some(t0 + T_NS)
    } else {
        None
    }
}

/// GCRA by compare-and-swap on an atomic TAT.
#[inline(always)]
fn gcra_cas(tat: &AtomicU64, now: u64) -> bool {
    let mut cur = tat.load(Ordering::Acquire);
    loop {
        match gcra(cur, now) {
            None => return false,
            Some(new) => {
                match tat.compare_exchange_weak(cur, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return true,
                    Err(seen) => cur = seen,
                }
            }
        }
    }
}

type Fold = foldhash::fast::RandomState;

/// GCRA on a dashmap: a read guard and a CAS; the entry API only for a new key.
#[inline(always)]
fn dash_check<S: std::hash::BuildHasher + Clone>(
    map: &dashmap::DashMap<u64, AtomicU64, S>,
    k: u64,
    now: u64,
) -> bool {
    if let Some(tat) = map.get(&k) {
        return gcra_cas(tat.value(), now);
    }
    match map.entry(k) {
        dashmap::Entry::Occupied(e) => gcra_cas(e.get(), now),
        dashmap::Entry::Vacant(v) => {
            let new = gcra(0, now);
            v.insert(AtomicU64::new(new.unwrap_or(0)));
            new.is_some()
        }
    }
}

enum Subject {
    Weir { store: MemoryStore, rule: Rule, clock: SystemClock },
    Dash { map: dashmap::DashMap<u64, AtomicU64, Fold>, clock: SystemClock },
    /// dashmap with std's SipHash (governor's hasher): separates the hasher from the table.
    DashSip { map: dashmap::DashMap<u64, AtomicU64>, clock: SystemClock },
    Papaya { map: papaya::HashMap<u64, AtomicU64, Fold>, clock: SystemClock },
    Scc { map: scc::HashMap<u64, u64, Fold>, clock: SystemClock },
    Governor { limiter: DefaultKeyedRateLimiter<u64> },
}

impl Subject {
    fn new(name: &str) -> Self {
        // The bare tables are sized for the 1M keys up front, as Weir's table is (its share
        // of a 2M-record store: 1M records, 1.25 slots each). governor's map grows.
        let n = usize::try_from(KEYS).unwrap_or(usize::MAX);
        match name {
            "weir" => Subject::Weir {
                store: MemoryStore::builder().capacity(2_000_000).build(),
                rule: Rule::gcra(1_000_000_000, Duration::from_secs(1), 1_000_000_000)
                    .unwrap_or_else(|e| panic!("rule: {e}")),
                clock: SystemClock::new(),
            },
            "dashmap" => Subject::Dash {
                map: dashmap::DashMap::with_capacity_and_hasher(n, Fold::default()),
                clock: SystemClock::new(),
            },
            "dashmap-sip" => Subject::DashSip {
                map: dashmap::DashMap::with_capacity(n),
                clock: SystemClock::new(),
            },
            "papaya" => Subject::Papaya {
                map: papaya::HashMap::with_capacity_and_hasher(n, Fold::default()),
                clock: SystemClock::new(),
            },
            "scc" => Subject::Scc {
                map: scc::HashMap::with_capacity_and_hasher(n, Fold::default()),
                clock: SystemClock::new(),
            },
            "governor" => Subject::Governor {
                limiter: RateLimiter::keyed(Quota::per_second(
                    NonZeroU32::new(1_000_000_000).unwrap_or(NonZeroU32::MIN),
                )),
            },
            other => panic!("unknown table {other}; one of {TABLES:?}"),
        }
    }

    /// One GCRA check of `k` now; whether it was allowed.
    #[inline(always)]
    fn check(&self, k: u64) -> bool {
        match self {
            Subject::Weir { store, rule, clock } => {
                match store.apply_now(&Key::from(k), rule, Op::Check { cost: 1 }, clock.now_ns()) {
                    Ok(Outcome::Decision(d)) => d.allowed,
                    other => panic!("weir: {other:?}"),
                }
            }
            Subject::Dash { map, clock } => dash_check(map, k, clock.now_ns()),
            Subject::DashSip { map, clock } => dash_check(map, k, clock.now_ns()),
            Subject::Papaya { map, clock } => {
                let now = clock.now_ns();
                let m = map.pin();
                match m.get(&k) {
                    Some(tat) => gcra_cas(tat, now),
                    None => gcra_cas(m.get_or_insert(k, AtomicU64::new(0)), now),
                }
            }
            Subject::Scc { map, clock } => {
                let now = clock.now_ns();
                loop {
                    let step = |_: &u64, tat: &mut u64| match gcra(*tat, now) {
                        Some(new) => {
                            *tat = new;
                            true
                        }
                        None => false,
                    };
                    if let Some(allowed) = map.update_sync(&k, step) {
                        return allowed;
                    }
                    let new = gcra(0, now);
                    if map.insert_sync(k, new.unwrap_or(0)).is_ok() {
                        return new.is_some();
                    }
                    // Another thread inserted it meanwhile: update that record.
                }
            }
            Subject::Governor { limiter } => limiter.check_key(&k).is_ok(),
        }
    }
}

/// xorshift64, a key in 0..n by multiply-shift (no division).
#[inline(always)]
fn next_key(state: &mut u64, n: u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    ((u128::from(x) * u128::from(n)) >> 64) as u64
}

/// Resident set size in bytes (`/proc/self/statm`, 4 KiB pages).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// One run: `threads` threads each do `iters` checks after a barrier. Returns the slowest
/// thread's time and the number of checks allowed.
fn run(subject: &Subject, threads: usize, iters: u64, hot: bool, seed: u64) -> (Duration, u64) {
    let barrier = Barrier::new(threads);
    let results: Vec<(Duration, u64)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (t as u64 + 1) | 1;
                    barrier.wait();
                    let start = Instant::now();
                    let mut allowed = 0u64;
                    if hot {
                        for _ in 0..iters {
                            allowed += u64::from(subject.check(black_box(HOT_KEY)));
                        }
                    } else {
                        for _ in 0..iters {
                            let k = next_key(&mut state, KEYS);
                            allowed += u64::from(subject.check(k));
                        }
                    }
                    (start.elapsed(), allowed)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|_| panic!("thread"))).collect()
    });
    let slowest = results.iter().map(|r| r.0).max().unwrap_or_default();
    (slowest, results.iter().map(|r| r.1).sum())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The memory probe, in its own process: RSS growth across checking keys 0..KEYS once each
/// in a fresh subject (measured from after its construction, so Weir's table, reserved at
/// the rule's first check, counts).
fn mem_probe(name: &str) {
    let subject = Subject::new(name);
    let before = rss_bytes();
    for k in 0..KEYS {
        black_box(subject.check(k));
    }
    let after = rss_bytes();
    println!("{}", after.saturating_sub(before) as f64 / KEYS as f64);
}

fn mem_bytes_per_key(name: &str) -> f64 {
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let v = (0..MEM_PROCS)
        .map(|_| {
            let out = Command::new(&exe)
                .args(["--mem", name])
                .output()
                .unwrap_or_else(|e| panic!("spawn: {e}"));
            String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse::<f64>()
                .unwrap_or_else(|e| panic!("--mem {name}: {e}"))
        })
        .collect();
    median(v)
}

struct Row {
    table: &'static str,
    /// (scenario, threads) → (M checks/s, ns per check per thread)
    cells: Vec<(f64, f64)>,
    allowed_share: f64,
    bytes_per_key: f64,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() == 2 && args[0] == "--mem" {
        mem_probe(&args[1]);
        return;
    }
    let only: Option<&str> = args.first().map(String::as_str);

    let started = Instant::now();
    eprintln!("load at start: {}", loadavg());
    let scenarios = [(false, 1usize), (false, 2), (true, 1), (true, 2)];
    let mut rows = Vec::new();
    for table in TABLES {
        if only.is_some_and(|o| o != table) {
            continue;
        }
        let subject = Subject::new(table);
        // Every key exists before timing: the runs measure checks of known keys.
        for k in 0..KEYS {
            black_box(subject.check(k));
        }
        let mut cells = Vec::new();
        let (mut checks, mut allowed) = (0u64, 0u64);
        for (i, &(hot, threads)) in scenarios.iter().enumerate() {
            let iters = if hot { ITERS_HOT } else { ITERS_UNIFORM };
            let mut mops = Vec::new();
            let mut ns = Vec::new();
            for r in 0..RUNS {
                let (t, a) = run(&subject, threads, iters, hot, (i * RUNS + r) as u64 + 1);
                checks += iters * threads as u64;
                allowed += a;
                let secs = t.as_secs_f64();
                mops.push((iters * threads as u64) as f64 / secs / 1e6);
                ns.push(secs * 1e9 / iters as f64);
            }
            let cell = (median(mops), median(ns));
            eprintln!(
                "{table:9} {:7} {threads}t: {:7.2} M/s {:7.1} ns/check  (load {})",
                if hot { "hot" } else { "uniform" },
                cell.0,
                cell.1,
                loadavg()
            );
            cells.push(cell);
        }
        drop(subject);
        let bytes_per_key = mem_bytes_per_key(table);
        eprintln!("{table:9} memory: {bytes_per_key:.1} B/key");
        rows.push(Row {
            table,
            cells,
            allowed_share: allowed as f64 / checks as f64,
            bytes_per_key,
        });
    }
    eprintln!("load at end: {} (wall {:.0} s)", loadavg(), started.elapsed().as_secs_f64());

    println!(
        "| table | 1M keys, 1 thread | 1M keys, 2 threads | 2t / 1t | hot key, 1 thread | hot key, 2 threads | 2t / 1t | B/key (1M keys) | allowed |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let c = &r.cells;
        let cell = |x: (f64, f64)| format!("{:.2} M/s ({:.1} ns)", x.0, x.1);
        println!(
            "| {} | {} | {} | {:.2}x | {} | {} | {:.2}x | {:.1} | {:.1} % |",
            r.table,
            cell(c[0]),
            cell(c[1]),
            c[1].0 / c[0].0,
            cell(c[2]),
            cell(c[3]),
            c[3].0 / c[2].0,
            r.bytes_per_key,
            r.allowed_share * 100.0
        );
    }
}
