//! The memory store's state snapshot end to end through its bytes: what is written (blocked,
//! locked-out and limited keys, on both the general and the lock-free path, never a key
//! that would pass), and what a new store makes of it (the same decisions; expired records,
//! records of rules no longer in force and invalid ones dropped). Under a manual clock.

#![allow(clippy::unwrap_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Clock, Key, Limiter, Lockout, ManualClock, MemoryStore, Rule, StateSnapshot};

const T0: u64 = 1_700_000_000_000_000_000;
const SEC: Duration = Duration::from_secs(1);
/// The admin API's longest block (`weir_engine::MAX_BLOCK`).
const MAX_BLOCK: Duration = Duration::from_secs(365 * 24 * 3600);

struct Rules(Vec<Rule>);

impl Rules {
    fn of(&self) -> impl Fn(u64) -> Option<Rule> + '_ {
        |scope| self.0.iter().find(|r| r.scope() == scope).copied()
    }
}

/// Exports `limiter`'s store through bytes into a new store at `now`, under `rules`.
fn restart(
    limiter: &Limiter<MemoryStore, ManualClock>,
    rules: &Rules,
    later: Duration,
) -> (
    Limiter<MemoryStore, ManualClock>,
    weir_core::ImportReport,
    usize,
) {
    let now = limiter.clock().now_ns();
    let bytes = limiter
        .store()
        .export_limited(now, rules.of())
        .encode()
        .unwrap();
    let snapshot = StateSnapshot::decode(&bytes).unwrap();
    let saved = snapshot.records.len();
    let clock = ManualClock::new(now);
    clock.advance(later);
    let store = MemoryStore::default();
    let report = store.import(&snapshot, clock.now_ns(), MAX_BLOCK, rules.of());
    // What Weir wrote itself is never clamped: it is within what its rules allow.
    assert_eq!(report.clamped, 0, "{report:?}");
    (Limiter::new(store, clock), report, saved)
}

#[test]
fn blocks_lockouts_and_limited_keys_survive_unlimited_ones_are_not_written() {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let lockout = Lockout::new(Duration::from_secs(300)).unwrap();
    let login = Rule::sliding_log(3, Duration::from_secs(60))
        .unwrap()
        .with_lockout(lockout)
        .named("login");
    let api = Rule::gcra(10, SEC, 2).unwrap().named("api");
    let window = Rule::fixed_window(5, Duration::from_secs(60))
        .unwrap()
        .named("window");
    let rules = Rules(vec![login, api, window]);

    // Locked out: the fourth failure.
    let alice = Key::new("login:alice").unwrap();
    for _ in 0..4 {
        limiter.check_now(&alice, &login, 1).unwrap();
    }
    // Blocked by hand, never limited.
    let mallory = Key::new("api:mallory").unwrap();
    limiter
        .block_now(&mallory, &api, Duration::from_secs(600))
        .unwrap();
    // Limited GCRA keys: a text key (general path) and an 8-byte key (lock-free path).
    let text = Key::new("api:bob").unwrap();
    let word = Key::from(42u64);
    for key in [&text, &word] {
        limiter.check_now(key, &api, 2).unwrap();
        assert!(!limiter.peek_now(key, &api).unwrap().allowed);
    }
    // A window at its limit.
    let full = Key::new("window:carol").unwrap();
    limiter.check_now(&full, &window, 5).unwrap();
    // Not limited: none of these is written.
    let fine = [Key::new("api:dave").unwrap(), Key::from(7u64)];
    for key in &fine {
        limiter.check_now(key, &api, 1).unwrap();
    }
    limiter
        .check_now(&Key::new("window:erin").unwrap(), &window, 4)
        .unwrap();

    let before: Vec<_> = [
        (&alice, &login),
        (&mallory, &api),
        (&text, &api),
        (&word, &api),
        (&full, &window),
    ]
    .iter()
    .map(|(k, r)| limiter.inspect_now(k, r).unwrap())
    .collect();
    let (restored, report, saved) = restart(&limiter, &rules, Duration::ZERO);
    assert_eq!(saved, 5, "only the blocked, locked-out and limited keys");
    assert_eq!(report.restored, 5, "{report:?}");
    let after: Vec<_> = [
        (&alice, &login),
        (&mallory, &api),
        (&text, &api),
        (&word, &api),
        (&full, &window),
    ]
    .iter()
    .map(|(k, r)| restored.inspect_now(k, r).unwrap())
    .collect();
    assert_eq!(before, after);
    assert!(after[0].blocked_for == Duration::from_secs(300) && after[0].strikes == 1);
    assert_eq!(after[1].blocked_for, Duration::from_secs(600));
    // The same decisions from here on.
    for (key, rule) in [
        (&alice, &login),
        (&mallory, &api),
        (&text, &api),
        (&word, &api),
        (&full, &window),
    ] {
        assert_eq!(
            restored.check_now(key, rule, 1).unwrap(),
            limiter.check_now(key, rule, 1).unwrap(),
            "{key:?}"
        );
    }
    // The keys that were not written start fresh.
    assert_eq!(restored.inspect_now(&fine[0], &api).unwrap().used, 0);
}

#[test]
fn a_restart_after_downtime_drops_what_expired_meanwhile() {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let rule = Rule::per_second(1).unwrap().named("r");
    let short = Key::new("short").unwrap();
    let long = Key::new("long").unwrap();
    limiter
        .block_now(&short, &rule, Duration::from_secs(60))
        .unwrap();
    limiter
        .block_now(&long, &rule, Duration::from_secs(3600))
        .unwrap();
    let rules = Rules(vec![rule]);

    // Down for ten minutes: the one-minute block is over, the hour's is 50 minutes on.
    let (restored, report, _) = restart(&limiter, &rules, Duration::from_secs(600));
    assert_eq!((report.restored, report.expired), (1, 1), "{report:?}");
    assert!(restored.check_now(&short, &rule, 1).unwrap().allowed);
    let denied = restored.check_now(&long, &rule, 1).unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after, Duration::from_secs(3000));
}

#[test]
fn records_of_rules_no_longer_in_force_are_dropped() {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let kept = Rule::per_second(1).unwrap().named("kept");
    let gone = Rule::per_second(1).unwrap().named("gone");
    let key = Key::new("k").unwrap();
    limiter
        .block_now(&key, &kept, Duration::from_secs(60))
        .unwrap();
    limiter
        .block_now(&key, &gone, Duration::from_secs(60))
        .unwrap();
    let snapshot = limiter
        .store()
        .export_limited(T0, Rules(vec![kept, gone]).of());
    assert_eq!(snapshot.records.len(), 2);
    let store = MemoryStore::default();
    let report = store.import(&snapshot, T0, MAX_BLOCK, Rules(vec![kept]).of());
    assert_eq!((report.restored, report.no_rule), (1, 1), "{report:?}");
    // Nor is a record written whose rule is not in force at export.
    let only = limiter.store().export_limited(T0, Rules(vec![gone]).of());
    assert_eq!(only.records.len(), 1);
}

#[test]
fn a_lockout_under_a_warm_up_rule_survives_with_its_ramp() {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let lockout = Lockout::new(Duration::from_secs(60)).unwrap();
    let rule = Rule::gcra(10, SEC, 5)
        .unwrap()
        .with_warmup(Duration::from_secs(30), 3)
        .unwrap()
        .with_lockout(lockout)
        .named("warm");
    let key = Key::new("cold-client").unwrap();
    while limiter.check_now(&key, &rule, 1).unwrap().allowed {}
    let before = limiter.inspect_now(&key, &rule).unwrap();
    assert_eq!(before.strikes, 1);
    let (restored, report, saved) = restart(&limiter, &Rules(vec![rule]), Duration::ZERO);
    assert_eq!((saved, report.restored), (1, 1), "{report:?}");
    assert_eq!(restored.inspect_now(&key, &rule).unwrap(), before);
    clock.advance(Duration::from_secs(61));
    restored.clock().advance(Duration::from_secs(61));
    assert_eq!(
        restored.check_now(&key, &rule, 1).unwrap(),
        limiter.check_now(&key, &rule, 1).unwrap()
    );
}

/// Issue 26: a forged state file was believed up to 20 years ahead (a 19-year lockout on a
/// rule whose lockout lasts at most an hour), and a block of 2^64 - 1 ms, past that
/// horizon, was dropped on restart. Now a lockout is clamped to its rule's max and any
/// other block to the admin API's maximum, both from the restart; neither is dropped.
#[test]
fn a_forged_lockout_and_an_endless_block_are_clamped_to_what_the_rule_allows() {
    let clock = ManualClock::new(T0);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let lockout = Lockout::new(Duration::from_secs(60))
        .unwrap()
        .escalating(Duration::from_secs(3600))
        .unwrap();
    let login = Rule::sliding_log(1, Duration::from_secs(60))
        .unwrap()
        .with_lockout(lockout)
        .named("login");
    let mallory = Key::new("mallory").unwrap();
    let alice = Key::new("alice").unwrap();
    limiter.check_now(&mallory, &login, 1).unwrap();
    assert!(!limiter.check_now(&mallory, &login, 1).unwrap().allowed);
    limiter
        .block_now(&alice, &login, Duration::from_millis(u64::MAX))
        .unwrap();
    let rules = Rules(vec![login]);
    let mut snapshot = limiter.store().export_limited(T0, rules.of());
    // Forge Mallory's lockout: 19 years, strikes forgotten a day after it ends.
    let year = 365 * 24 * 3600 * 1_000_000_000u64;
    for saved in &mut snapshot.records {
        if saved.key == mallory {
            let guard = saved.record.guard.as_deref_mut().unwrap();
            guard.blocked_until_ns = T0 + 19 * year;
            guard.strikes_expire_ns = guard.blocked_until_ns + 24 * 3600 * 1_000_000_000;
            saved.record.expires_ns = guard.strikes_expire_ns;
        }
    }
    let snapshot = StateSnapshot::decode(&snapshot.encode().unwrap()).unwrap();
    let store = MemoryStore::default();
    let report = store.import(&snapshot, T0, MAX_BLOCK, rules.of());
    assert_eq!((report.restored, report.clamped), (2, 2), "{report:?}");
    assert!(report.first_clamped.is_some(), "{report:?}");
    let restored = Limiter::new(store, clock.clone());
    let locked = restored.inspect_now(&mallory, &login).unwrap();
    assert_eq!(locked.blocked_for, Duration::from_secs(3600), "{locked:?}");
    let blocked = restored.inspect_now(&alice, &login).unwrap();
    assert_eq!(blocked.blocked_for, MAX_BLOCK, "{blocked:?}");
    // Both end when the clamp says, not before.
    clock.advance(Duration::from_secs(3600) - Duration::from_nanos(1));
    assert!(!restored.check_now(&mallory, &login, 1).unwrap().allowed);
    clock.advance(Duration::from_nanos(1));
    assert!(restored.check_now(&mallory, &login, 1).unwrap().allowed);
    assert!(!restored.check_now(&alice, &login, 1).unwrap().allowed);
}
