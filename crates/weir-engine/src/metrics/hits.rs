//! Hit counters in envoyproxy/ratelimit's units and names, so a ratelimit dashboard works
//! on Weir unchanged: `ratelimit_service_rate_limit_{total_hits, over_limit, near_limit,
//! within_limit, shadow_mode}` with the labels `domain`, `key1`, `key2`, as ratelimit's
//! statsd-exporter mapping (`src/stats/prom/default_mapper.yaml`) names them. They count
//! **hits** (a request's `hits_addend`), split as ratelimit's `BaseRateLimiter` splits them:
//! of a request that crosses the limit, the hits past the limit are `over_limit` and those
//! between the near-limit threshold and the limit `near_limit`; a denied shadow descriptor
//! counts in `over_limit` and `shadow_mode`; an unlimited rule counts nothing.
//!
//! Counters, named as upstream names them: the Prometheus text format (what a default
//! scrape gets) serves them under these names, OpenMetrics with `_total` added
//! (`exposition.rs`). `key1` / `key2` are the first two levels of the rule's id below its
//! domain (`rl.foo.bar` → `foo`, `bar`): bounded, never a client's value (ratelimit's
//! `detailed_metric` adds nothing here). The service-level series are in `service.rs`.
//!
//! The same counting also keeps each rule's counts since the last statsd flush
//! ([`RuleHits::take`], read by `statsd.rs`): one place counts, both outputs read it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use weir_core::Decision;

use super::decisions::NearLimit;

/// A count of hits.
pub(crate) type HitCount = Counter<u64, AtomicU64>;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub(crate) struct HitLabels {
    domain: String,
    key1: String,
    key2: String,
}

impl HitLabels {
    /// The labels of rule `rule_id` of `domain`.
    pub(crate) fn of(domain: &str, rule_id: &str) -> HitLabels {
        let below = rule_id
            .strip_prefix(domain)
            .and_then(|rest| rest.strip_prefix('.'))
            .unwrap_or(rule_id);
        let mut levels = below.split('.');
        HitLabels {
            domain: domain.to_string(),
            key1: levels.next().unwrap_or_default().to_string(),
            key2: levels.next().unwrap_or_default().to_string(),
        }
    }
}

/// The five families, registered once.
#[derive(Debug, Clone, Default)]
pub(crate) struct HitFamilies {
    total: Family<HitLabels, HitCount>,
    over: Family<HitLabels, HitCount>,
    near: Family<HitLabels, HitCount>,
    within: Family<HitLabels, HitCount>,
    shadow: Family<HitLabels, HitCount>,
    /// Whether statsd is sent ([`HitFamilies::send_statsd`]): only then does a hit also
    /// count in its rule's pending counts, so a server without statsd writes half as many
    /// counters a decision (each on a line every core writes when one rule is hot).
    statsd: Arc<AtomicBool>,
}

impl HitFamilies {
    /// Registers the families in `registry` under ratelimit's names.
    pub(crate) fn register(registry: &mut Registry) -> HitFamilies {
        let families = HitFamilies::default();
        for (name, help, family) in [
            (
                "total_hits",
                "Hits of each rule (envoyproxy/ratelimit's unit)",
                &families.total,
            ),
            ("over_limit", "Hits over each rule's limit", &families.over),
            (
                "near_limit",
                "Hits past each rule's near-limit ratio, within its limit",
                &families.near,
            ),
            (
                "within_limit",
                "Hits within each rule's limit",
                &families.within,
            ),
            (
                "shadow_mode",
                "Hits over a shadow rule's limit (not enforced)",
                &families.shadow,
            ),
        ] {
            registry.register(
                format!("ratelimit_service_rate_limit_{name}"),
                help,
                family.clone(),
            );
        }
        families
    }

    /// The counters of one rule, created (at zero) now.
    pub(crate) fn counters(&self, domain: &str, rule_id: &str) -> RuleHits {
        let labels = HitLabels::of(domain, rule_id);
        RuleHits {
            total: self.total.get_or_create_owned(&labels),
            over: self.over.get_or_create_owned(&labels),
            near: self.near.get_or_create_owned(&labels),
            within: self.within.get_or_create_owned(&labels),
            shadow: self.shadow.get_or_create_owned(&labels),
            pending: Arc::default(),
            statsd: Arc::clone(&self.statsd),
        }
    }

    /// From now on, hits also count for statsd ([`RuleHits::take`]): the engine says so
    /// when it is built with a statsd sink, before its first decision.
    pub(crate) fn send_statsd(&self) {
        self.statsd.store(true, Ordering::Relaxed);
    }
}

/// The five statistics, in ratelimit's names and in [`RuleHits::take`]'s order.
pub(crate) const STATS: [&str; 5] = [
    "total_hits",
    "over_limit",
    "near_limit",
    "within_limit",
    "shadow_mode",
];

/// One rule's hit counters.
#[derive(Debug, Clone)]
pub(crate) struct RuleHits {
    total: HitCount,
    over: HitCount,
    near: HitCount,
    within: HitCount,
    shadow: HitCount,
    /// This rule's counts not yet flushed to statsd, in [`STATS`] order (counted only when
    /// statsd is sent).
    pending: Arc<[AtomicU64; 5]>,
    statsd: Arc<AtomicBool>,
}

impl RuleHits {
    /// The counts since the last call, in [`STATS`] order (each reset to zero).
    pub(crate) fn take(&self) -> [u64; 5] {
        [0, 1, 2, 3, 4].map(|i| self.pending[i].swap(0, Ordering::Relaxed))
    }

    fn add(&self, stat: usize, hits: u64) {
        let family = match stat {
            0 => &self.total,
            1 => &self.over,
            2 => &self.near,
            3 => &self.within,
            _ => &self.shadow,
        };
        family.inc_by(hits);
        if !self.statsd.load(Ordering::Relaxed) {
            return;
        }
        if let Some(pending) = self.pending.get(stat) {
            pending.fetch_add(hits, Ordering::Relaxed);
        }
    }

    /// Counts `hits` decided by `decision` (`shadow_denied`: denied, not enforced).
    pub(crate) fn count(
        &self,
        decision: &Decision,
        hits: u64,
        shadow_denied: bool,
        near: NearLimit,
    ) {
        const TOTAL: usize = 0;
        const OVER: usize = 1;
        const NEAR: usize = 2;
        const WITHIN: usize = 3;
        const SHADOW: usize = 4;
        let limit = decision.limit;
        let threshold = near.threshold(limit);
        self.add(TOTAL, hits);
        if decision.allowed {
            // `remaining` is after these hits.
            let after = limit.saturating_sub(decision.remaining);
            let before = after.saturating_sub(hits);
            if after > threshold {
                self.add(NEAR, after - threshold.max(before));
            }
            self.add(WITHIN, hits);
            return;
        }
        // Denied: `remaining` is before these hits (a denial charges nothing).
        let before = limit.saturating_sub(decision.remaining);
        if before >= limit {
            self.add(OVER, hits);
        } else {
            let after = before.saturating_add(hits);
            self.add(OVER, after.saturating_sub(limit));
            self.add(NEAR, limit - threshold.max(before).min(limit));
        }
        if shadow_denied {
            self.add(SHADOW, hits);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn decision(allowed: bool, limit: u64, remaining: u64) -> Decision {
        Decision {
            allowed,
            limit,
            remaining,
            reset_after: Duration::ZERO,
            retry_after: Duration::ZERO,
            delay: Duration::ZERO,
        }
    }

    fn counts(hits: &RuleHits) -> [u64; 5] {
        [
            &hits.total,
            &hits.over,
            &hits.near,
            &hits.within,
            &hits.shadow,
        ]
        .map(|c| c.get())
    }

    #[test]
    fn hits_split_as_ratelimits_base_limiter_splits_them() {
        let families = HitFamilies::default();
        families.send_statsd();
        let hits = families.counters("rl", "rl.foo.bar.baz");
        let near = NearLimit::DEFAULT; // limit 10: threshold 8
        for remaining in (0..10).rev() {
            hits.count(&decision(true, 10, remaining), 1, false, near);
        }
        // 10 within, of which the 9th and 10th are near the limit.
        assert_eq!(counts(&hits), [10, 0, 2, 10, 0]);
        hits.count(&decision(false, 10, 0), 3, true, near);
        assert_eq!(counts(&hits), [13, 3, 2, 10, 3]);

        // 5 hits asked with 7 used: 3 fit (near: 8..10 → 2), 2 over; Weir denies all 5.
        let fresh = families.counters("rl", "rl.other");
        fresh.count(&decision(false, 10, 3), 5, false, near);
        assert_eq!(counts(&fresh), [5, 2, 2, 0, 0]);
        // statsd's counts are the same, each taken once.
        assert_eq!(hits.take(), [13, 3, 2, 10, 3]);
        assert_eq!(hits.take(), [0; 5]);
        assert_eq!(
            HitLabels::of("rl", "rl.foo.bar.baz"),
            HitLabels {
                domain: "rl".into(),
                key1: "foo".into(),
                key2: "bar".into()
            }
        );
        assert_eq!(HitLabels::of("d", "d.k").key2, "");
    }

    #[test]
    fn without_statsd_only_the_prometheus_counters_count() {
        let families = HitFamilies::default();
        let hits = families.counters("rl", "rl.foo");
        hits.count(&decision(true, 10, 9), 1, false, NearLimit::DEFAULT);
        assert_eq!(counts(&hits), [1, 0, 0, 1, 0]);
        assert_eq!(hits.take(), [0; 5]);
        // Turned on, the next hits count for statsd too (the counters made before included).
        families.send_statsd();
        hits.count(&decision(true, 10, 8), 1, false, NearLimit::DEFAULT);
        assert_eq!(counts(&hits), [2, 0, 0, 2, 0]);
        assert_eq!(hits.take(), [1, 0, 0, 1, 0]);
    }
}
