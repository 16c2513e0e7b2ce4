//! One node of a store spread over several (a Redis Cluster's primaries, `memcache://a,b`'s
//! servers) killed and restarted: what `cluster_nodes.rs` and `memcached_servers.rs` share.
//! Two rules of one domain (`closed`: 3 a minute, fail_closed; `local`: 4 a minute,
//! local_fallback, with two instances), the checks that place values on the node that will
//! die, and the expectations while it is down and once it is back. Every wait is bounded.

use std::time::Duration;

use super::{check_body, TestServer};

/// The rules of `domain`: `closed` (fixed window, 3 a minute, `fail_closed`) and `local`
/// (fixed window, 4 a minute, `local_fallback`).
pub fn rules(domain: &str) -> String {
    format!(
        "domain: {domain}
descriptors:
  - key: closed
    rule: {{algorithm: fixed_window, limit: 3, window: 1m, on_failure: fail_closed}}
  - key: local
    rule: {{algorithm: fixed_window, limit: 4, window: 1m, on_failure: local_fallback}}
"
    )
}

/// A server deciding the domain of [`rules`] on a store spread over several nodes.
pub struct Nodes<'a> {
    pub server: &'a TestServer,
    pub domain: &'a str,
    /// The store's name in `weir_store_fallback{store=…}`.
    pub store: &'a str,
}

/// The values of one key placed on the node that will die (`dead`) and elsewhere (`live`).
pub struct Placed {
    pub dead: Vec<String>,
    pub live: Vec<String>,
}

impl Nodes<'_> {
    /// The status of one check of (`key`, `value`).
    pub async fn status(&self, key: &str, value: &str) -> u16 {
        self.server
            .post("/v1/check", &check_body(self.domain, &[(key, value)]))
            .await
            .status
    }

    /// `n` checks of (`key`, `value`): their statuses.
    pub async fn statuses(&self, key: &str, value: &str, n: usize) -> Vec<u16> {
        let mut all = Vec::new();
        for _ in 0..n {
            all.push(self.status(key, value).await);
        }
        all
    }

    /// With the node holding `closed.dead` and `local.dead` down: its keys go to their
    /// rule's policy (fail_closed: 429; local_fallback: this instance's share, 4 / 2), the
    /// live nodes' keys keep their exact limits, and the metrics say part of the store is
    /// in fallback.
    pub async fn expect_only_the_dead_nodes_keys_fail(&self, closed: &Placed, local: &Placed) {
        // Enough failed calls to open the dead node's circuit, each answered by the policy.
        for value in &closed.dead {
            assert_eq!(self.status("closed", value).await, 429, "{value}");
        }
        assert_eq!(self.statuses("closed", &closed.dead[0], 6).await, [429; 6]);
        assert_eq!(
            self.statuses("closed", &closed.live[0], 3).await,
            [200, 200, 429],
            "a key on a live node keeps its exact limit"
        );
        assert_eq!(
            self.statuses("local", &local.live[0], 4).await,
            [200, 200, 200, 429],
            "a local_fallback key on a live node keeps its exact limit, not the share"
        );
        assert_eq!(
            self.statuses("local", &local.dead[0], 3).await,
            [200, 200, 429],
            "a local_fallback key on the dead node gets this instance's share"
        );
        let metrics = self.server.get("/metrics").await.body;
        let fallback = format!(r#"weir_store_fallback{{store="{}"}} 1"#, self.store);
        assert!(metrics.contains(&fallback), "{metrics}");
    }

    /// Waits (bounded, 30 s) until the metrics say no part of the store is in fallback.
    pub async fn until_every_node_decides(&self) {
        let settled = format!(r#"weir_store_fallback{{store="{}"}} 0"#, self.store);
        for _ in 0..1500 {
            if self.server.get("/metrics").await.body.contains(&settled) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("the restarted {} node never took its keys back", self.store);
    }

    /// Once the restarted (empty) node decides again: its keys are decided there exactly,
    /// and the live nodes' keys still are.
    pub async fn expect_every_key_on_the_store(&self, closed: &Placed) {
        assert_eq!(
            self.statuses("closed", &closed.dead[1], 4).await,
            [200, 200, 200, 429]
        );
        assert_eq!(
            self.statuses("closed", &closed.live[1], 3).await,
            [200, 200, 429]
        );
    }
}
