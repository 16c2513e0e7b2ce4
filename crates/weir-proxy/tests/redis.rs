//! `weir proxy` on a real redis-server (started on a free loopback port, stopped at the
//! end): two proxies in front of one backend share one limit through Redis, and when Redis
//! dies they go on limiting locally (each rule's default failure policy) instead of failing;
//! a `fail_closed` rule during the outage is a `503` saying the store is unavailable.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{backend, client, get, proxy, settings, upstream, Backend};
use weir_engine::StoreSpec;
use weir_proxy::ProxySettings;
use weir_testkit::servers::RedisServer;

const GLOBAL_5_PER_HOUR: &str = "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: fixed_window, limit: 5, window: 1h}
";

fn on_redis(b: &Backend, redis: &RedisServer) -> ProxySettings {
    let mut s = settings(upstream(b), GLOBAL_5_PER_HOUR);
    s.server.engine.store = StoreSpec::parse(&redis.url()).unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_proxies_on_one_redis_share_one_limit_and_survive_its_death() {
    let mut redis = RedisServer::start();
    let b = backend("app", Duration::ZERO).await;
    let first = proxy(on_redis(&b, &redis)).await;
    let second = proxy(on_redis(&b, &redis)).await;
    let c = client();
    let mut codes = Vec::new();
    for _ in 0..4 {
        codes.push(get(&c, first.addr, "/", &[]).await.status);
        codes.push(get(&c, second.addr, "/", &[]).await.status);
    }
    assert_eq!(codes.iter().filter(|&&c| c == 200).count(), 5, "{codes:?}");
    assert_eq!(
        b.record.count(),
        5,
        "five in all reached the backend, not five each"
    );

    redis.kill();
    // Local fallback: each proxy decides alone (its share of the limit, a fresh local
    // count); no request fails with 5xx, none waits past the store timeout.
    for _ in 0..3 {
        let a = get(&c, first.addr, "/", &[]).await;
        assert!(
            a.status == 200 || a.status == 429,
            "{} {}",
            a.status,
            a.body
        );
    }
    let ready = get(&c, first.api, "/readyz", &[]).await;
    assert!(ready.body.contains("fallback"), "{}", ready.body);
}

const GLOBAL_FAIL_CLOSED: &str = "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: fixed_window, limit: 1, window: 1h, on_failure: fail_closed}
";

/// Issue 26: a `fail_closed` rule denied during an outage looked like a real limit (`429`,
/// `Retry-After`); the proxy now answers `503` saying the store is unavailable, and a real
/// limit keeps its `429`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fail_closed_rule_during_an_outage_is_a_503_saying_so_not_a_429() {
    let mut redis = RedisServer::start();
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), GLOBAL_FAIL_CLOSED);
    s.server.engine.store = StoreSpec::parse(&redis.url()).unwrap();
    // A debug build's first calls (loading Weir's functions) may take longer than the
    // default store timeout on a busy machine: they must not be the outage.
    s.server.engine.failover.timeout = Duration::from_secs(10);
    let p = proxy(s).await;
    let c = client();
    assert_eq!(get(&c, p.addr, "/", &[]).await.status, 200);
    let limited = get(&c, p.addr, "/", &[]).await;
    assert_eq!(limited.status, 429, "a real limit: {}", limited.body);

    redis.kill();
    for attempt in 0..3 {
        let a = get(&c, p.addr, "/", &[]).await;
        assert_eq!(a.status, 503, "attempt {attempt}: {}", a.body);
        assert!(
            a.body.contains("unavailable"),
            "attempt {attempt}: {}",
            a.body
        );
    }
    assert_eq!(
        b.record.count(),
        1,
        "nothing reached the backend during the outage"
    );
    let metrics = get(&c, p.api, "/metrics", &[]).await;
    assert!(
        metrics
            .body
            .lines()
            .any(|l| l.starts_with("weir_decisions_total")
                && l.contains("outcome=\"failed_closed\"")),
        "{}",
        metrics.body
    );
}
