//! The over-limit cache answers a denied key in-process until its retry_after, and only
//! then goes back to the store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::sync::Arc;
use std::time::Duration;

use weir_core::{Key, Limiter, ManualClock, Rule};
use weir_resilience::OverLimitCache;
use weir_testkit::faults::{Fault, FaultyStore};

#[tokio::test]
async fn denied_keys_are_answered_locally_until_retry_after() {
    let primary = FaultyStore::new();
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let limiter = Limiter::new(OverLimitCache::new(primary.clone()), clock.clone());
    let rule = Rule::per_second(2).unwrap();
    let key = Key::new("attacker").unwrap();

    assert!(limiter.check(&key, &rule, 1).await.unwrap().allowed);
    assert!(limiter.check(&key, &rule, 1).await.unwrap().allowed);
    let denied = limiter.check(&key, &rule, 1).await.unwrap();
    assert!(!denied.allowed);
    let calls = primary.calls();

    clock.advance(Duration::from_millis(100));
    for _ in 0..1000 {
        let d = limiter.check(&key, &rule, 1).await.unwrap();
        assert!(!d.allowed);
        assert_eq!(d.retry_after, Duration::from_millis(400));
    }
    assert_eq!(primary.calls(), calls, "the attack never reached the store");
    // The 1000, and the first denial: the second admission announced it.
    assert_eq!(limiter.store().stats().hits, 1001);

    clock.advance(Duration::from_millis(400));
    assert!(limiter.check(&key, &rule, 1).await.unwrap().allowed);
    assert_eq!(primary.calls(), calls + 1);
}

#[tokio::test]
async fn a_reset_drops_the_cached_denial() {
    let primary = FaultyStore::new();
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let limiter = Limiter::new(OverLimitCache::new(primary), clock);
    let rule = Rule::per_second(1).unwrap();
    let key = Key::new("k").unwrap();
    limiter.check(&key, &rule, 1).await.unwrap();
    assert!(!limiter.check(&key, &rule, 1).await.unwrap().allowed);
    limiter.reset(&key, &rule).await.unwrap();
    assert!(limiter.check(&key, &rule, 1).await.unwrap().allowed);
}

/// A named rule keeps its record when its parameters change, as `CL.THROTTLE` and a
/// reload do: a denial cached under the old parameters must not answer the new ones.
#[tokio::test]
async fn a_named_rule_with_new_parameters_asks_the_store_again() {
    let primary = FaultyStore::new();
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let limiter = Limiter::new(OverLimitCache::new(primary.clone()), clock.clone());
    let key = Key::new("caller").unwrap();
    let s = Duration::from_secs(1);
    let strict = Rule::gcra(1, s, 1).unwrap().named("api");
    let relaxed = Rule::gcra(1, s, 5).unwrap().named("api");
    assert_eq!(strict.scope(), relaxed.scope(), "one record for both");

    assert!(limiter.check(&key, &strict, 1).await.unwrap().allowed);
    assert!(!limiter.check(&key, &strict, 1).await.unwrap().allowed);
    assert_eq!(
        limiter.store().stats().hits,
        1,
        "the strict denial is cached"
    );

    let calls = primary.calls();
    let d = limiter.check(&key, &relaxed, 1).await.unwrap();
    assert!(d.allowed, "the larger burst admits at once: {d:?}");
    assert_eq!((d.limit, d.remaining), (5, 3));
    assert_eq!(primary.calls(), calls + 1, "asked the store");
    // The admission moved the record: the strict denial is gone, and the strict rule asks
    // the store again (which denies: the record is two units in).
    let again = limiter.check(&key, &strict, 1).await.unwrap();
    assert!(!again.allowed);
    assert_eq!(primary.calls(), calls + 2);
}

/// The rules whose allowed decisions announce the next denial, and two whose do not.
fn rules() -> Vec<Rule> {
    let s = Duration::from_secs(1);
    vec![
        Rule::gcra(10, s, 3).unwrap(),
        Rule::token_bucket(4, 10, s).unwrap(),
        Rule::leaky_bucket(4, 10, s).unwrap(),
        Rule::fixed_window(5, s).unwrap(),
        Rule::sliding_log(5, s).unwrap(),
        Rule::sliding_window(5, s, Duration::from_millis(100)).unwrap(),
    ]
}

#[tokio::test]
async fn an_exhausting_admission_is_remembered_as_the_next_denial() {
    for rule in rules()[..4].iter() {
        let primary = FaultyStore::new();
        let clock = ManualClock::new(1_700_000_000_000_000_000);
        let limiter = Limiter::new(OverLimitCache::new(primary.clone()), clock.clone());
        let reference = Limiter::new(weir_core::MemoryStore::default(), clock.clone());
        let key = Key::new("hot").unwrap();
        for _ in 0..rule.limit() {
            assert!(limiter.check(&key, rule, 1).await.unwrap().allowed);
            assert!(reference.check(&key, rule, 1).await.unwrap().allowed);
        }
        let calls = primary.calls();
        let denied = limiter.check(&key, rule, 1).await.unwrap();
        assert_eq!(
            primary.calls(),
            calls,
            "{rule:?}: the first denial is local"
        );
        assert_eq!(
            denied,
            reference.check(&key, rule, 1).await.unwrap(),
            "{rule:?}"
        );
        assert!(!denied.allowed && denied.retry_after > Duration::ZERO);

        clock.advance(denied.retry_after - Duration::from_nanos(1));
        assert!(!limiter.check(&key, rule, 1).await.unwrap().allowed);
        assert_eq!(primary.calls(), calls, "{rule:?}: still local 1 ns before");
        clock.advance(Duration::from_nanos(1));
        assert!(limiter.check(&key, rule, 1).await.unwrap().allowed);
        assert_eq!(
            primary.calls(),
            calls + 1,
            "{rule:?}: back to the store on time"
        );
    }
}

/// The cache never changes a decision: the same traffic through the cache and straight
/// to a memory store gets the same answers, with fewer store calls.
#[tokio::test]
async fn cached_and_uncached_decide_alike() {
    for rule in rules() {
        let primary = FaultyStore::new();
        let clock = ManualClock::new(1_700_000_000_000_000_000);
        let cached = Limiter::new(OverLimitCache::new(primary.clone()), clock.clone());
        let direct = Limiter::new(weir_core::MemoryStore::default(), clock.clone());
        let keys: Vec<Key> = (0..3).map(|k| Key::new(format!("k{k}")).unwrap()).collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for step in 0..3000 {
            clock.advance(Duration::from_millis(next(40)));
            let key = &keys[usize::try_from(next(3)).unwrap()];
            let cost = if next(4) == 0 {
                1 + next(rule.limit())
            } else {
                1
            };
            let a = cached.check(key, &rule, cost).await.unwrap();
            let b = direct.check(key, &rule, cost).await.unwrap();
            assert_eq!(a.allowed, b.allowed, "{rule:?} step {step}");
            assert_eq!(a.retry_after, b.retry_after, "{rule:?} step {step}");
            assert_eq!(a.reset_after, b.reset_after, "{rule:?} step {step}");
            if cost == 1 {
                assert_eq!(a, b, "{rule:?} step {step}");
            }
        }
        assert!(
            primary.calls() < 3000,
            "{rule:?}: some answers came from the cache"
        );
    }
}

#[tokio::test]
async fn under_a_lockout_the_first_denial_reaches_the_store() {
    let primary = FaultyStore::new();
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let limiter = Limiter::new(OverLimitCache::new(primary.clone()), clock.clone());
    let rule = Rule::fixed_window(2, Duration::from_secs(1))
        .unwrap()
        .with_lockout(weir_core::Lockout::new(Duration::from_secs(60)).unwrap());
    let key = Key::new("login:alice").unwrap();
    limiter.check(&key, &rule, 1).await.unwrap();
    limiter.check(&key, &rule, 1).await.unwrap();
    let calls = primary.calls();
    let denied = limiter.check(&key, &rule, 1).await.unwrap();
    assert_eq!(primary.calls(), calls + 1, "the store saw the denial");
    assert_eq!(
        denied.retry_after,
        Duration::from_secs(60),
        "and locked the key"
    );
}

/// A store that answers after a few scheduler turns, so concurrent checks overlap.
#[derive(Clone)]
struct Slow(FaultyStore);

impl weir_core::Store for Slow {
    async fn apply(
        &self,
        key: weir_core::ScopedKey<'_>,
        rule: &Rule,
        op: weir_core::Op<'_>,
        now_ns: u64,
    ) -> Result<weir_core::Outcome, weir_core::CheckError> {
        for _ in 0..3 {
            tokio::task::yield_now().await;
        }
        self.0.apply(key, rule, op, now_ns).await
    }

    async fn check_all(
        &self,
        limits: weir_core::ScopedLimits<'_>,
        cost: u64,
        now_ns: u64,
    ) -> Result<weir_core::Decisions, weir_core::CheckError> {
        self.0.check_all(limits, cost, now_ns).await
    }

    async fn ping(&self) -> Result<(), weir_core::StoreError> {
        self.0.ping().await
    }
}

#[tokio::test]
async fn when_a_denial_runs_out_one_check_asks_the_store_and_the_rest_wait_for_it() {
    let primary = FaultyStore::new();
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let limiter = Arc::new(Limiter::new(
        OverLimitCache::new(Slow(primary.clone())),
        clock.clone(),
    ));
    let rule = Rule::gcra(10, Duration::from_secs(1), 1).unwrap();
    let key = Key::new("hot").unwrap();
    assert!(limiter.check(&key, &rule, 1).await.unwrap().allowed);
    clock.advance(Duration::from_millis(100));
    let calls = primary.calls();

    let mut checks = tokio::task::JoinSet::new();
    for _ in 0..50 {
        let (limiter, key) = (limiter.clone(), key.clone());
        checks.spawn(async move { limiter.check(&key, &rule, 1).await.unwrap() });
    }
    let decisions = checks.join_all().await;
    assert_eq!(decisions.iter().filter(|d| d.allowed).count(), 1);
    for d in decisions.iter().filter(|d| !d.allowed) {
        assert_eq!(d.retry_after, Duration::from_millis(100));
    }
    assert_eq!(primary.calls(), calls + 1, "one probe reached the store");
}

#[tokio::test]
async fn a_probe_that_goes_away_wakes_the_checks_waiting_for_it() {
    let primary = FaultyStore::new();
    let clock = ManualClock::new(1_700_000_000_000_000_000);
    let limiter = Arc::new(Limiter::new(
        OverLimitCache::new(primary.clone()),
        clock.clone(),
    ));
    let rule = Rule::gcra(10, Duration::from_secs(1), 1).unwrap();
    let key = Key::new("hot").unwrap();
    limiter.check(&key, &rule, 1).await.unwrap();
    clock.advance(Duration::from_millis(100));

    primary.set(Fault::Hang);
    let probe = {
        let (limiter, key) = (limiter.clone(), key.clone());
        tokio::spawn(async move { limiter.check(&key, &rule, 1).await })
    };
    tokio::task::yield_now().await; // the probe claims the key and hangs in the store
    let waiter = {
        let (limiter, key) = (limiter.clone(), key.clone());
        tokio::spawn(async move { limiter.check(&key, &rule, 1).await })
    };
    tokio::task::yield_now().await;
    assert!(
        !waiter.is_finished(),
        "the second check waits for the probe"
    );
    primary.set(Fault::None);
    probe.abort();
    let d = tokio::time::timeout(Duration::from_secs(5), waiter)
        .await
        .expect("woken when the probe went away")
        .unwrap()
        .unwrap();
    assert!(d.allowed, "and asked the store itself");
}

/// Issue 10: a cached denial must report what the store would (`reset_after` of a day-long
/// window, a lockout's reset), not a value of its own. Compared with a bare store.
#[tokio::test]
async fn a_cached_denial_reports_what_the_store_would() {
    use weir_core::{Lockout, MemoryStore};
    let day = Duration::from_secs(86_400);
    let rules = [
        Rule::fixed_window(3, day).unwrap(),
        Rule::sliding_log(3, day).unwrap(),
        Rule::gcra(3, day, 3).unwrap(),
        Rule::sliding_log(3, Duration::from_secs(60))
            .unwrap()
            .with_lockout(Lockout::new(Duration::from_secs(300)).unwrap()),
    ];
    for rule in rules {
        let clock = ManualClock::new(1_700_000_000_000_000_000);
        let cached = Limiter::new(OverLimitCache::new(FaultyStore::new()), clock.clone());
        let bare = Limiter::new(MemoryStore::default(), clock.clone());
        let key = Key::new("k").unwrap();
        for step in 0..8 {
            let c = cached.check(&key, &rule, 1).await.unwrap();
            let b = bare.check(&key, &rule, 1).await.unwrap();
            assert_eq!(c, b, "{rule:?}, check {step}");
            clock.advance(Duration::from_secs(7));
        }
    }
}
