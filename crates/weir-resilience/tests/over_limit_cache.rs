//! The over-limit cache answers a denied key in-process until its retry_after, and only
//! then goes back to the store.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Key, Limiter, ManualClock, Rule};
use weir_resilience::OverLimitCache;
use weir_testkit::faults::FaultyStore;

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
    assert_eq!(limiter.store().stats().hits, 1000);

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
