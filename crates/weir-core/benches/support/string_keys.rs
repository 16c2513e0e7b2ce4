//! The memory store on string keys (part of the `memory_store` bench, `scripts/bench`
//! group names `strings_hot` and `strings_10000`): text keys under one-word rules, decided
//! by the lock-free string-key table (`weir`), beside the same keys and rule on the general
//! path's sharded mutex (`weir-general`: a store whose rule scope was given a share of its
//! own keeps its string keys there, which is where every string key was decided before the
//! string-key table). Same binary, same pass, same keys: the ratio is the table's gain.
//!
//! - `strings_hot`: one global key (`"global"`), every check admitted and written (GCRA,
//!   1 a second, burst 10^9), on 1 and 2 threads: the hot key of a global limit.
//! - `strings_10000`: 10 000 IPv6 addresses as text (`2001:db8:…`, 20-39 bytes) drawn at
//!   random, the same rule: per-client keys.
//! - `strings_weighted_hot`: the global key under the two-window weighted estimate, 10 000 a
//!   second: admitted until the window's limit, then denied (a read).

use super::*;

/// A store deciding string keys under one rule (scoped, as a `Limiter` asks).
struct Strings {
    store: MemoryStore,
    rule: Rule,
    clock: SystemClock,
    keys: Vec<Key>,
}

impl Strings {
    /// On the lock-free path, or (`general`) on the sharded mutex.
    fn new(rule: Rule, keys: Vec<Key>, general: bool) -> Self {
        let mut builder = MemoryStore::builder().capacity(1 << 20).shards(64);
        if general {
            builder = builder.scope_share(rule.scope(), 50);
        }
        Self {
            store: builder.build(),
            rule,
            clock: SystemClock::new(),
            keys,
        }
    }
}

impl Subject for Strings {
    #[inline]
    fn check(&self, k: u64) -> bool {
        let key = &self.keys[k as usize];
        let now = self.clock.now_ns();
        match self
            .store
            .apply_scoped_now(key, &self.rule, Op::Check { cost: 1 }, now)
        {
            Ok(Outcome::Decision(d)) => d.allowed,
            _ => false,
        }
    }
}

/// `n` IPv6 addresses as text, 20 to 39 bytes each.
fn ipv6_keys(n: u64) -> Vec<Key> {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|_| {
            let r = rng.next();
            let groups = [r >> 48, (r >> 32) & 0xFFFF, (r >> 16) & 0xFFFF, r & 0xFFFF];
            let [a, b, c, d] = groups.map(|g| g & 0xFFFF);
            Key::new(format!("2001:db8:{a:x}:{b:x}:{c:x}:{d:x}:{:x}:1", r % 97)).unwrap()
        })
        .collect()
}

pub(crate) fn strings(c: &mut Criterion) {
    let admit = Rule::gcra(1, Duration::from_secs(1), 1_000_000_000).unwrap();
    let weighted = Rule::weighted_window(10_000, Duration::from_secs(1)).unwrap();
    let global = || vec![Key::new("global").unwrap()];
    for (group_name, rule, keys) in [
        ("strings_hot", admit, global()),
        ("strings_10000", admit, ipv6_keys(10_000)),
        ("strings_weighted_hot", weighted, global()),
    ] {
        let nkeys = keys.len() as u64;
        let mut group = c.benchmark_group(group_name);
        for threads in [1, 2] {
            let lock_free = Strings::new(rule, keys.clone(), false);
            let general = Strings::new(rule, keys.clone(), true);
            for k in 0..nkeys {
                Subject::check(&lock_free, k);
                Subject::check(&general, k);
            }
            let now = lock_free.clock.now_ns();
            assert_eq!(
                lock_free.store.lock_free_len(now),
                keys.len(),
                "all lock-free"
            );
            assert_eq!(
                general.store.lock_free_len(now),
                0,
                "all on the general path"
            );
            bench(&mut group, group_name, "weir", &lock_free, threads, nkeys);
            bench(
                &mut group,
                group_name,
                "weir-general",
                &general,
                threads,
                nkeys,
            );
        }
        group.finish();
    }
}
