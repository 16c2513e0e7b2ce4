//! Warm-up through the front door: a `Limiter` over the memory store under the manual
//! clock, on the lock-free shape of key (8 bytes, which warm-up rules must not take) and on
//! a text key: a cold key's small burst and third of the rate, the full rate once warm, cold
//! again after idling, and a token bucket alike, its `retry_after` paying the ramp.

#![allow(clippy::unwrap_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_core::{Key, Limiter, ManualClock, MemoryStore, Rule};

const MS: Duration = Duration::from_millis(1);

/// Requests admitted when `key` is asked every `every` for `span`.
async fn admitted(
    limiter: &Limiter<MemoryStore, ManualClock>,
    clock: &ManualClock,
    key: &Key,
    rule: &Rule,
    every: Duration,
    span: Duration,
) -> u32 {
    let mut n = 0;
    for _ in 0..span.as_nanos() / every.as_nanos() {
        n += u32::from(limiter.check(key, rule, 1).await.unwrap().allowed);
        clock.advance(every);
    }
    n
}

#[tokio::test]
async fn a_cold_key_ramps_up_and_an_idle_one_cools_down() {
    let clock = ManualClock::new(1_000_000_000_000);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    // 100 per second, burst 10, warm-up 1 s from a third of the rate.
    let rule = Rule::gcra(100, Duration::from_secs(1), 10)
        .unwrap()
        .with_warmup(Duration::from_secs(1), 3)
        .unwrap();
    for key in [Key::from(7u64), Key::new("text-key").unwrap()] {
        clock.advance(Duration::from_secs(100));
        // Asked every millisecond: 4 at once (1 + 9/3), then about 33 a second, rising.
        let first = admitted(&limiter, &clock, &key, &rule, MS, 10 * MS).await;
        assert_eq!(first, 4, "{key:?}");
        let cold = admitted(&limiter, &clock, &key, &rule, MS, 100 * MS).await;
        assert_eq!(cold, 3, "{key:?}");
        let _ = admitted(&limiter, &clock, &key, &rule, MS, 900 * MS).await;
        let warm = admitted(&limiter, &clock, &key, &rule, MS, 100 * MS).await;
        assert_eq!(warm, 10, "{key:?}: the full rate after W at full use");
        // Idle (full) for less than W: still warm; then for W: cold again.
        // Bursts of 20 at once (1 ns apart): after 0.9 s, then after 2 s more.
        let mut bursts = Vec::new();
        for idle in [900 * MS, 2_000 * MS] {
            clock.advance(idle);
            let ns = Duration::from_nanos(1);
            bursts.push(admitted(&limiter, &clock, &key, &rule, ns, 20 * ns).await);
        }
        assert_eq!(
            bursts,
            [10, 4],
            "{key:?}: a warm key's whole burst, then a cold one's"
        );
    }
}

#[tokio::test]
async fn a_token_bucket_warms_up_alike() {
    let clock = ManualClock::new(1_000_000_000_000);
    let limiter = Limiter::new(MemoryStore::default(), clock.clone());
    let bucket = Rule::token_bucket(10, 100, Duration::from_secs(1))
        .unwrap()
        .with_warmup(Duration::from_secs(1), 3)
        .unwrap();
    let key = Key::from(8u64);
    assert_eq!(
        admitted(&limiter, &clock, &key, &bucket, MS, 10 * MS).await,
        4
    );
    assert_eq!(
        admitted(&limiter, &clock, &key, &bucket, MS, 100 * MS).await,
        3
    );
    // Past a cold burst, the next unit comes about 3 intervals on (not 1).
    let other = Key::new("waiter").unwrap();
    for _ in 0..4 {
        limiter.check(&other, &bucket, 1).await.unwrap();
    }
    let denied = limiter.check(&other, &bucket, 1).await.unwrap();
    assert!(!denied.allowed);
    assert!(
        denied.retry_after > 10 * MS && denied.retry_after <= 30 * MS,
        "{denied:?}"
    );
}
