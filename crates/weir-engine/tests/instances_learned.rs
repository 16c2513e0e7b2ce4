//! The instance count each guarded store divides by, learned on a real `redis-server`:
//! two instances announce themselves on the presence key, and each then divides both its
//! local fallback's share and its leased rules' overload claims by two, though each was
//! told `--instances 1`; a larger stated count stays in force. Announcements are made
//! directly (at the test's time), so nothing waits on the presence timer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use weir_engine::{AnyStore, StoreClock, StoreOptions, StoreSpec};
use weir_resilience::{FailoverConfig, ShareSource};
use weir_testkit::servers::RedisServer;
use weir_testkit::T0_NS;

fn open(redis: &RedisServer, instances: u64) -> AnyStore {
    let spec = StoreSpec::parse(&redis.url()).unwrap();
    let failover = FailoverConfig {
        instances,
        ..FailoverConfig::default()
    };
    let mut options = StoreOptions::default();
    options.prefix = Some("presence".to_string());
    AnyStore::open_with(&spec, failover, StoreClock::Process, &options).unwrap()
}

/// One presence announcement of `store`: the count the store answered.
async fn announce(store: &AnyStore) -> u64 {
    match store {
        AnyStore::Redis(s) => s.inner().inner().announce(T0_NS).await.unwrap(),
        other => panic!("not Redis: {other:?}"),
    }
}

/// The instance count `store`'s leased rules divide by.
fn lease_instances(store: &AnyStore) -> u64 {
    match store {
        AnyStore::Redis(s) => s.instances(),
        other => panic!("not Redis: {other:?}"),
    }
}

// Issue 29: the local fallback learned the instance count from the presence key, but
// leased rules kept dividing by the stated `--instances` (default 1): an overloaded
// instance could claim the whole limit while another shared it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leased_rules_and_the_fallback_divide_by_the_learned_instance_count() {
    let redis = RedisServer::start();
    let (first, second) = (open(&redis, 1), open(&redis, 1));
    assert_eq!(
        lease_instances(&first),
        1,
        "nothing learned yet: the stated 1"
    );
    assert_eq!(first.fallback_share().unwrap().source, ShareSource::Stated);

    assert_eq!(announce(&first).await, 1);
    assert_eq!(announce(&second).await, 2);
    assert_eq!(announce(&first).await, 2);
    for store in [&first, &second] {
        let share = store.fallback_share().unwrap();
        assert_eq!(
            (share.instances, share.source, share.learned),
            (2, ShareSource::Learned, Some(2))
        );
        assert_eq!(
            lease_instances(store),
            2,
            "leased rules divide by the same count"
        );
    }

    // An operator's larger count stays in force.
    let third = open(&redis, 5);
    assert_eq!(announce(&third).await, 3);
    let share = third.fallback_share().unwrap();
    assert_eq!(
        (share.instances, share.source, share.learned),
        (5, ShareSource::Stated, Some(3))
    );
    assert_eq!(lease_instances(&third), 5);
}
