//! Weir's [`MemoryStore`] against `governor` 0.10, side by side in one run, mirroring the
//! scenarios of the shared governor harness (`../shared/bench/governor_bench`).
//! Not a test: nothing here asserts a timing. `scripts/bench` runs it and tabulates the
//! results into `BENCHMARKS.md`.
//!
//! Groups (each on 1 and 2 threads sharing one limiter/store):
//! - `direct_allow`: one hot key, every check allowed (governor's CAS path). Both sides use
//!   the same GCRA quota: 10^9 per second, burst 10^9 (T = 1 ns, tau = 1 s). `governor` is
//!   its direct (keyless) limiter, `weir-direct` Weir's ([`DirectLimiter::check_now`]), and
//!   `weir` one 8-byte key through the memory store.
//! - `direct_deny`: the same subjects, 1 per second, burst 1: every check after the first
//!   denied.
//! - `keyed_{1,10000,1000000}`: u64 keys, 10 per second, burst 10 (governor
//!   `Quota::per_second(10)`, Weir `Rule::per_second(10)`: the same GCRA), keys pre-populated
//!   and drawn uniformly at random with xorshift inside the timed loop. `weir` builds a
//!   `Key::from(u64)` per check, as a caller of the store holding a u64 must;
//!   `weir-keyed` is a [`KeyedLimiter`] (one rule, u64 keys: governor's keyed limiter's
//!   counterpart, its own store of the same capacity); `weir-prebuilt-key` indexes
//!   a `Vec<Key>` built beforehand (store cost without the key allocation; 1 and 10k keys
//!   only); `naive-mutex-hashmap` is one `Mutex<HashMap<u64, u64>>` running GCRA inline.
//! - `keyed_admit_1000000`: the same 1M keys under 1 per second with a burst of 10^9:
//!   every check is admitted and written, by both libraries, whatever their speed, and
//!   every record stays live (its TAT runs ahead of the clock). Under 10 per second the
//!   share of denials (a read, no write) grows with a subject's speed, so the two sides of
//!   `keyed_1000000` do different work; here they do the same. (A quota of 10^9 a second
//!   would also admit everything, but each record would expire a nanosecond after its
//!   check, so Weir would treat most checks as new keys.) Two floors run beside them, to
//!   show what bounds any keyed store here: `floor-u64-array`, one `AtomicU64` per key
//!   indexed by the key itself (no hash, no identity: one random cache line of an 8 MB
//!   array and an 8-byte CAS), and `floor-one-slot`, a table of 16-byte `[key | TAT]`
//!   slots the size of Weir's, one slot per key at its hash (one 16-byte load and CAS,
//!   no bucket scan, no identity).
//! - `strings_hot`, `strings_10000`, `strings_weighted_hot`: string keys, lock-free
//!   against the general path (`support/string_keys.rs`).
//! - `parts`: single-thread costs of the pieces of one Weir check (clock, key, step); the
//!   clock beside governor's, `Instant` anchored to the epoch and `SystemTime`.
//!
//! Each library reads its own default clock once per check: governor its quanta clock,
//! Weir `SystemClock::now_ns()`. Timing is `iter_custom`: every thread does `iters` checks
//! after a barrier, and the sample is the slowest thread's time, so criterion's time per
//! iteration is one thread's latency per check and `Throughput::Elements(threads)` gives
//! the aggregate checks per second.

// Benches may unwrap (setup only), read `Instant::now` (they measure time), and truncate in
// the Lemire multiply-shift reduction, which is the point of it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::disallowed_methods,
    clippy::cast_possible_truncation
)]

use std::collections::HashMap;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use governor::clock::Clock as _;
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use portable_atomic::AtomicU128;
use weir_core::{
    Clock, DirectLimiter, Key, KeyedLimiter, MemoryStore, Op, Outcome, Record, Rule, SystemClock,
};

#[path = "support/string_keys.rs"]
mod string_keys;

/// xorshift64*, as in the governor harness: about 1 ns per key.
struct Rng(u64);

impl Rng {
    #[inline(always)]
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `[0, n)` (Lemire multiply-shift).
    #[inline(always)]
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
}

/// One limiter under test: `check(k)` is one rate-limit decision for key `k`.
trait Subject: Sync {
    fn check(&self, k: u64) -> bool;
}

impl Subject for DefaultDirectRateLimiter {
    #[inline]
    fn check(&self, _k: u64) -> bool {
        RateLimiter::check(self).is_ok()
    }
}

impl Subject for DirectLimiter {
    #[inline]
    fn check(&self, _k: u64) -> bool {
        self.check_now().is_ok_and(|d| d.allowed)
    }
}

impl Subject for DefaultKeyedRateLimiter<u64> {
    #[inline]
    fn check(&self, k: u64) -> bool {
        self.check_key(&k).is_ok()
    }
}

/// How a Weir subject turns the drawn u64 into a [`Key`].
enum Keys {
    /// One key for every check (the direct scenarios).
    One(Key),
    /// `Key::from(k)` per check.
    Build,
    /// `keys[k]`, built before timing.
    Prebuilt(Vec<Key>),
}

struct Weir {
    store: MemoryStore,
    rule: Rule,
    clock: SystemClock,
    keys: Keys,
}

impl Weir {
    fn new(rule: Rule, nkeys: u64, keys: Keys) -> Self {
        let capacity = usize::try_from(nkeys * 2).unwrap().max(1 << 20);
        let store = MemoryStore::builder().capacity(capacity).shards(64).build();
        Self {
            store,
            rule,
            clock: SystemClock::new(),
            keys,
        }
    }

    #[inline]
    fn decide(&self, key: &Key) -> bool {
        let now = self.clock.now_ns();
        match self
            .store
            .apply_now(key, &self.rule, Op::Check { cost: 1 }, now)
        {
            Ok(Outcome::Decision(d)) => d.allowed,
            _ => false,
        }
    }
}

impl Subject for Weir {
    #[inline]
    fn check(&self, k: u64) -> bool {
        match &self.keys {
            Keys::One(key) => self.decide(key),
            Keys::Build => self.decide(&Key::from(k)),
            Keys::Prebuilt(keys) => self.decide(&keys[k as usize]),
        }
    }
}

/// The naive baseline: one `Mutex<HashMap<u64, TAT>>` (std SipHash) and GCRA inline, on
/// Weir's clock. What a hand-rolled limiter looks like; both libraries should beat it.
struct Naive {
    tats: Mutex<HashMap<u64, u64>>,
    interval_ns: u64,
    tolerance_ns: u64,
    clock: SystemClock,
}

impl Naive {
    fn new(rate: u64, per: Duration, burst: u64) -> Self {
        let interval_ns = u64::try_from(per.as_nanos()).unwrap() / rate;
        Self {
            tats: Mutex::new(HashMap::new()),
            interval_ns,
            tolerance_ns: interval_ns * burst,
            clock: SystemClock::new(),
        }
    }
}

impl Subject for Naive {
    #[inline]
    fn check(&self, k: u64) -> bool {
        let now = self.clock.now_ns();
        let mut tats = self.tats.lock().unwrap();
        let tat = tats.entry(k).or_insert(0);
        let new_tat = (*tat).max(now) + self.interval_ns;
        let allowed = new_tat - now <= self.tolerance_ns;
        if allowed {
            *tat = new_tat;
        }
        allowed
    }
}

impl Subject for KeyedLimiter<u64> {
    #[inline]
    fn check(&self, k: u64) -> bool {
        self.check_now(&k).is_ok_and(|d| d.allowed)
    }
}

/// The floor of any keyed limiter at these sizes: one `AtomicU64` per key, indexed by the
/// key itself (no hash, no key stored, no table to grow, no eviction), GCRA inline on Weir's
/// clock, written with one 8-byte compare-and-swap. One random cache line a check and
/// nothing else: no design of a keyed store can do less work per check, so its ratio to
/// governor bounds what any store could reach on this machine.
struct Floor {
    tats: Box<[AtomicU64]>,
    interval_ns: u64,
    tolerance_ns: u64,
    clock: SystemClock,
}

impl Floor {
    fn new(nkeys: u64, rate: u64, burst: u64) -> Self {
        let interval_ns = 1_000_000_000 / rate;
        Self {
            tats: (0..nkeys).map(|_| AtomicU64::new(0)).collect(),
            interval_ns,
            tolerance_ns: interval_ns * burst,
            clock: SystemClock::new(),
        }
    }
}

impl Subject for Floor {
    #[inline]
    fn check(&self, k: u64) -> bool {
        let now = self.clock.now_ns();
        let slot = &self.tats[k as usize];
        let mut tat = slot.load(Ordering::Relaxed);
        loop {
            let new_tat = tat.max(now) + self.interval_ns;
            if new_tat - now > self.tolerance_ns {
                return false;
            }
            match slot.compare_exchange_weak(tat, new_tat, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(seen) => tat = seen,
            }
        }
    }
}

/// The floor of a table that keeps each key's identity in 16 bytes, as Weir's does: a
/// table of 16-byte slots `[key | TAT]` the size of Weir's (1.25 slots a key), each key at
/// one slot of its own (its hash's; collisions here simply share a slot: it does not keep
/// identity, it only does the memory work), one 16-byte load and one 16-byte
/// compare-and-swap a check. Weir's table does this plus the scan of the key's two buckets.
struct OneSlot {
    slots: Box<[AtomicU128]>,
    interval_ns: u64,
    tolerance_ns: u64,
    clock: SystemClock,
}

impl OneSlot {
    fn new(nkeys: u64, rate: u64, burst: u64) -> Self {
        let interval_ns = 1_000_000_000 / rate;
        Self {
            slots: (0..nkeys * 5 / 4).map(|_| AtomicU128::new(0)).collect(),
            interval_ns,
            tolerance_ns: interval_ns * burst,
            clock: SystemClock::new(),
        }
    }
}

impl Subject for OneSlot {
    #[inline]
    fn check(&self, k: u64) -> bool {
        let now = self.clock.now_ns();
        let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = ((u128::from(h ^ (h >> 29)) * self.slots.len() as u128) >> 64) as usize;
        let slot = &self.slots[i];
        let mut seen = slot.load(Ordering::Acquire);
        loop {
            let tat = (seen >> 64) as u64;
            let new_tat = tat.max(now) + self.interval_ns;
            if new_tat - now > self.tolerance_ns {
                return false;
            }
            let next = (u128::from(new_tat) << 64) | u128::from(k);
            match slot.compare_exchange(seen, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now_seen) => seen = now_seen,
            }
        }
    }
}

static SEED: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);

/// `threads` threads each do `iters` checks on keys uniform in `[0, nkeys)` (always 0 when
/// `nkeys == 1`). Returns the slowest thread's time and the number of allowed checks.
fn run<S: Subject>(subject: &S, threads: usize, iters: u64, nkeys: u64) -> (Duration, u64) {
    let barrier = Barrier::new(threads);
    let work = || {
        let mut rng = Rng(SEED.fetch_add(0x1234_5678_9ABC_DEF1, Ordering::Relaxed) | 1);
        barrier.wait();
        let start = Instant::now();
        let mut allowed = 0u64;
        for _ in 0..iters {
            let k = if nkeys == 1 { 0 } else { rng.below(nkeys) };
            allowed += u64::from(subject.check(black_box(k)));
        }
        (start.elapsed(), black_box(allowed))
    };
    if threads == 1 {
        return work();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(work)).collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .fold((Duration::ZERO, 0), |(t, a), (dt, da)| (t.max(dt), a + da))
    })
}

/// Benchmarks `subject` as `{name}/{threads}t` and prints the share of checks allowed, so
/// the two libraries can be seen to decide alike.
fn bench<S: Subject>(
    group: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    group_name: &str,
    name: &str,
    subject: &S,
    threads: usize,
    nkeys: u64,
) {
    let id = format!("{name}/{threads}t");
    let (mut checks, mut allowed) = (0u64, 0u64);
    group.throughput(Throughput::Elements(threads as u64));
    group.bench_function(&id, |b| {
        b.iter_custom(|iters| {
            let (elapsed, a) = run(subject, threads, iters, nkeys);
            checks += iters * threads as u64;
            allowed += a;
            elapsed
        });
    });
    if checks > 0 {
        eprintln!(
            "allowed {group_name}/{id}: {:.2}% of {checks} checks",
            100.0 * allowed as f64 / checks as f64
        );
    }
}

fn nz(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

fn direct(c: &mut Criterion) {
    let cases = [("direct_allow", 1_000_000_000u32), ("direct_deny", 1u32)];
    for (group_name, per_second) in cases {
        let mut group = c.benchmark_group(group_name);
        for threads in [1, 2] {
            // Fresh limiters per thread count, so the 2-thread run starts like the 1-thread one.
            let gov: DefaultDirectRateLimiter =
                RateLimiter::direct(Quota::per_second(nz(per_second)));
            let rule = Rule::per_second(u64::from(per_second)).unwrap();
            let weir = Weir::new(rule, 1, Keys::One(Key::from(0u64)));
            let direct = DirectLimiter::new(rule).unwrap();
            bench(&mut group, group_name, "governor", &gov, threads, 1);
            bench(&mut group, group_name, "weir-direct", &direct, threads, 1);
            bench(&mut group, group_name, "weir", &weir, threads, 1);
        }
        group.finish();
    }
}

fn keyed(c: &mut Criterion) {
    // (group, keys, rate per second, burst).
    for (group_name, nkeys, per_second, burst) in [
        ("keyed_1", 1u64, 10u32, 10u32),
        ("keyed_10000", 10_000, 10, 10),
        ("keyed_1000000", 1_000_000, 10, 10),
        // One a second with a burst of 10^9: every check is admitted, and every record
        // stays live (its TAT runs ahead of the clock), so both sides find every key and
        // write it, whatever their speed.
        ("keyed_admit_1000000", 1_000_000, 1, 1_000_000_000),
    ] {
        let mut group = c.benchmark_group(group_name);
        let gov: DefaultKeyedRateLimiter<u64> =
            RateLimiter::keyed(Quota::per_second(nz(per_second)).allow_burst(nz(burst)));
        let rule = Rule::gcra(
            u64::from(per_second),
            Duration::from_secs(1),
            u64::from(burst),
        )
        .unwrap();
        let weir = Weir::new(rule, nkeys, Keys::Build);
        // At 1M keys a `Vec<Key>` costs two extra cache misses per check (the vector slot and
        // the key's heap bytes), more than building the key, so it would measure nothing useful.
        let prebuilt = (nkeys <= 10_000).then(|| {
            Weir::new(
                rule,
                nkeys,
                Keys::Prebuilt((0..nkeys).map(Key::from).collect()),
            )
        });
        let (per, burst) = (u64::from(per_second), u64::from(burst));
        let naive = Naive::new(per, Duration::from_secs(1), burst);
        // Weir's counterpart of governor's keyed limiter: one rule, u64 keys, no `Key`.
        let keyed: KeyedLimiter<u64> = KeyedLimiter::with_store(
            rule,
            MemoryStore::builder()
                .capacity(usize::try_from(nkeys * 2).unwrap().max(1 << 20))
                .build(),
            SystemClock::new(),
        )
        .unwrap();
        for k in 0..nkeys {
            Subject::check(&keyed, k);
        }
        let floors = (group_name == "keyed_admit_1000000").then(|| {
            (
                Floor::new(nkeys, per, burst),
                OneSlot::new(nkeys, per, burst),
            )
        });
        for k in 0..nkeys {
            if let Some((floor, one_slot)) = &floors {
                Subject::check(floor, k);
                Subject::check(one_slot, k);
            }
            Subject::check(&gov, k);
            Subject::check(&weir, k);
            Subject::check(&naive, k);
            if let Some(p) = &prebuilt {
                Subject::check(p, k);
            }
        }
        for threads in [1, 2] {
            bench(&mut group, group_name, "governor", &gov, threads, nkeys);
            bench(&mut group, group_name, "weir", &weir, threads, nkeys);
            bench(&mut group, group_name, "weir-keyed", &keyed, threads, nkeys);
            if let Some((floor, one_slot)) = &floors {
                bench(
                    &mut group,
                    group_name,
                    "floor-u64-array",
                    floor,
                    threads,
                    nkeys,
                );
                bench(
                    &mut group,
                    group_name,
                    "floor-one-slot",
                    one_slot,
                    threads,
                    nkeys,
                );
            }
            if let Some(p) = &prebuilt {
                bench(
                    &mut group,
                    group_name,
                    "weir-prebuilt-key",
                    p,
                    threads,
                    nkeys,
                );
            }
            bench(
                &mut group,
                group_name,
                "naive-mutex-hashmap",
                &naive,
                threads,
                nkeys,
            );
        }
        group.finish();
    }
}

/// Where a Weir check spends its time, piece by piece (one thread, one hot key).
fn parts(c: &mut Criterion) {
    let mut group = c.benchmark_group("parts");
    group.throughput(Throughput::Elements(1));
    // The clock, against governor's and the two standard clocks SystemClock could read
    // instead: the monotonic clock anchored to the wall clock (its reference, and what it
    // read before) and the wall clock itself.
    let clock = SystemClock::new();
    group.bench_function("weir_clock_now_ns", |b| b.iter(|| clock.now_ns()));
    let quanta = governor::clock::DefaultClock::default();
    group.bench_function("governor_clock_now", |b| b.iter(|| quanta.now()));
    let (anchor, anchor_unix_ns) = (Instant::now(), clock.now_ns());
    group.bench_function("instant_anchored_now_ns", |b| {
        b.iter(|| anchor_unix_ns + anchor.elapsed().as_nanos() as u64)
    });
    group.bench_function("system_time_now_ns", |b| {
        b.iter(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        })
    });
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    group.bench_function("xorshift_below_1m", |b| {
        b.iter(|| rng.below(black_box(1_000_000)))
    });
    group.bench_function("key_from_u64", |b| b.iter(|| Key::from(black_box(42u64))));
    let hasher = foldhash::quality::RandomState::default();
    let key = Key::from(42u64);
    group.bench_function("foldhash_8_bytes", |b| {
        b.iter(|| std::hash::BuildHasher::hash_one(&hasher, black_box(key.as_bytes())))
    });
    let rule = Rule::per_second(1_000_000_000).unwrap();
    let mut record = Record::fresh(&rule, 0);
    let mut now = 1_700_000_000_000_000_000u64;
    group.bench_function("step_apply_gcra_allow", |b| {
        b.iter(|| {
            now += 20;
            weir_core::step::apply(&rule, &mut record, &Op::Check { cost: 1 }, black_box(now))
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(15);
    targets = direct, keyed, string_keys::strings, parts
}
criterion_main!(benches);
