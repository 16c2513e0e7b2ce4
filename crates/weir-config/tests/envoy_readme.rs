//! envoyproxy/ratelimit's README examples (`config/envoy/`, loaded unchanged as one
//! directory) answered as that service answers: most specific match, wildcards, nested
//! descriptors and depth, `replaces`, shadow mode, unlimited, `requests_per_unit: 0`,
//! `detailed_metric` and `hits_addend`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::PathBuf;
use std::time::Duration;

use weir_config::{Descriptor, Limit, Matched, RuleSet, Unit};
use weir_core::Algorithm;

fn envoy_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/envoy")
}

fn rules() -> RuleSet {
    RuleSet::load(&envoy_dir()).unwrap()
}

fn one(rules: &RuleSet, domain: &str, entries: &[(&str, &str)]) -> Option<Matched> {
    rules
        .matches(domain, &[Descriptor::new(entries.iter().copied())])
        .unwrap()
        .remove(0)
}

/// The limit as ratelimit reports it: requests per unit.
fn per(m: &Option<Matched>) -> Option<(u64, Unit)> {
    m.as_ref()
        .and_then(|m| m.rate_limit)
        .map(|r| (r.requests_per_unit, r.unit))
}

#[test]
fn the_directory_holds_every_readme_domain() {
    let rules = rules();
    let domains: Vec<&str> = rules.domains().collect();
    assert_eq!(
        domains,
        [
            "edge_proxy_per_ip",
            "example4",
            "example6",
            "example7",
            "example8",
            "example9",
            "internal",
            "messaging",
            "mongo_cps"
        ]
    );
}

#[test]
fn example_1_exact_values() {
    let rules = rules();
    let users = one(&rules, "mongo_cps", &[("database", "users")]).unwrap();
    assert_eq!(per(&Some(users.clone())), Some((500, Unit::Second)));
    assert_eq!(users.rule_id.as_ref(), "mongo_cps.database_users");
    // A fixed window of one second, aligned to the epoch like ratelimit's cache keys.
    let rule = users.rule().unwrap();
    assert!(matches!(rule.algorithm(), Algorithm::FixedWindow(_)));
    assert_eq!(rule.window(), Duration::from_secs(1));
    assert!(one(&rules, "mongo_cps", &[("database", "default")]).is_some());
    assert!(one(&rules, "mongo_cps", &[("database", "orders")]).is_none());
}

#[test]
fn example_2_nested_and_key_only_descriptors() {
    let rules = rules();
    let marketing = [("message_type", "marketing"), ("to_number", "2061111111")];
    let m = one(&rules, "messaging", &marketing);
    assert_eq!(per(&m), Some((5, Unit::Day)));
    assert_eq!(
        m.as_ref().unwrap().rule_id.as_ref(),
        "messaging.message_type_marketing.to_number"
    );
    // Each number gets its own counter under the key-only rule.
    let other = one(
        &rules,
        "messaging",
        &[("message_type", "marketing"), ("to_number", "2062222222")],
    );
    assert_ne!(m.unwrap().key, other.unwrap().key);
    assert_eq!(
        per(&one(&rules, "messaging", &[("to_number", "2061111111")])),
        Some((100, Unit::Day))
    );
    // The placeholder node has no rate_limit: nothing applies.
    assert!(one(&rules, "messaging", &[("message_type", "marketing")]).is_none());
    // Other message types reach no node.
    assert!(one(
        &rules,
        "messaging",
        &[("message_type", "transactional"), ("to_number", "1")]
    )
    .is_none());
    // Both descriptors in one request: both limits apply.
    let both = rules
        .matches(
            "messaging",
            &[
                Descriptor::new(marketing),
                Descriptor::new([("to_number", "2061111111")]),
            ],
        )
        .unwrap();
    assert_eq!(per(&both[0]), Some((5, Unit::Day)));
    assert_eq!(per(&both[1]), Some((100, Unit::Day)));
}

#[test]
fn example_3_most_specific_match_and_a_block_list() {
    let rules = rules();
    assert_eq!(
        per(&one(
            &rules,
            "edge_proxy_per_ip",
            &[("remote_address", "50.0.0.1")]
        )),
        Some((10, Unit::Second))
    );
    let blocked = one(
        &rules,
        "edge_proxy_per_ip",
        &[("remote_address", "50.0.0.5")],
    )
    .unwrap();
    assert_eq!(
        blocked.limit,
        Limit::Deny {
            window: Duration::from_secs(1)
        }
    );
    assert_eq!(
        blocked.rule_id.as_ref(),
        "edge_proxy_per_ip.remote_address_50.0.0.5"
    );
}

#[test]
fn example_4_the_request_depth_must_reach_a_rule() {
    let rules = rules();
    let deep = [("key", "value"), ("subkey", "subvalue")];
    assert_eq!(
        per(&one(&rules, "example4", &deep)),
        Some((300, Unit::Second))
    );
    assert!(one(&rules, "example4", &[("key", "value")]).is_none());

    let first = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/valid/readme_example4_not_matching.yaml");
    let not_matching = RuleSet::load(&first).unwrap();
    assert!(
        one(&not_matching, "example4", &deep).is_none(),
        "more entries than levels"
    );
    assert_eq!(
        per(&one(&not_matching, "example4", &[("key", "value")])),
        Some((300, Unit::Second))
    );
}

#[test]
fn example_5_unlimited() {
    let rules = rules();
    let ldap = one(&rules, "internal", &[("ldap", "x")]).unwrap();
    assert!(ldap.is_unlimited());
    assert!(ldap.rule().is_none());
    assert_eq!(
        per(&one(&rules, "internal", &[("azure", "x")])),
        Some((100, Unit::Minute))
    );
}

#[test]
fn example_6_shadow_mode() {
    let rules = rules();
    let a = one(
        &rules,
        "example6",
        &[("service", "auth-service"), ("user", "user-a")],
    )
    .unwrap();
    let b = one(
        &rules,
        "example6",
        &[("service", "auth-service"), ("user", "user-b")],
    )
    .unwrap();
    assert!(a.shadow);
    assert_eq!(a.rule().unwrap().limit(), 10);
    assert!(!b.shadow);
    assert_eq!(b.rule().unwrap().limit(), 20);
    assert!(one(
        &rules,
        "example6",
        &[("service", "auth-service"), ("user", "user-c")]
    )
    .is_none());
}

#[test]
fn example_7_replaces() {
    let rules = rules();
    let first = [("key_1", "value_1"), ("user", "bkthomps")];
    let second = [("key_2", "value_2"), ("user", "bkthomps")];
    assert_eq!(
        per(&one(&rules, "example7", &first)),
        Some((5, Unit::Second))
    );
    assert_eq!(
        per(&one(&rules, "example7", &second)),
        Some((10, Unit::Second))
    );
    let both = rules
        .matches(
            "example7",
            &[Descriptor::new(first), Descriptor::new(second)],
        )
        .unwrap();
    assert!(
        both[0].is_none(),
        "specific_limit is replaced: not checked, not charged"
    );
    assert_eq!(per(&both[1]), Some((10, Unit::Second)));
}

#[test]
fn example_8_detailed_metric() {
    let rules = rules();
    let unspecified = one(&rules, "example8", &[("key1", "unspecified_value")]).unwrap();
    assert!(unspecified.detailed_metric);
    assert_eq!(unspecified.rule().unwrap().limit(), 10);
    let value1 = one(&rules, "example8", &[("key1", "value1")]).unwrap();
    assert!(!value1.detailed_metric);
    assert_eq!(value1.rule().unwrap().limit(), 20);
}

#[test]
fn example_9_wildcard_values() {
    let rules = rules();
    for value in ["value_1", "value_2", "value"] {
        let m = one(&rules, "example9", &[("key1", value)]).unwrap();
        assert_eq!(m.rule_id.as_ref(), "example9.key1_value*");
        assert_eq!(m.rule().unwrap().limit(), 20);
    }
    // Each value counts on its own.
    assert_ne!(
        one(&rules, "example9", &[("key1", "value_1")]).unwrap().key,
        one(&rules, "example9", &[("key1", "value_2")]).unwrap().key
    );
    assert!(one(&rules, "example9", &[("key1", "other")]).is_none());
}

#[test]
fn hits_addend_per_request_and_per_descriptor() {
    let rules = rules();
    let plain = Descriptor::new([("database", "users")]);
    let own = plain.clone().with_hits_addend(7);
    let zero = plain.clone().with_hits_addend(0);
    let matched = rules.matches("mongo_cps", &[plain, own, zero]).unwrap();
    let [plain, own, zero] = [0, 1, 2].map(|i| matched[i].as_ref().unwrap());
    assert_eq!(plain.hits(0), 1, "an unset request addend counts 1");
    assert_eq!(plain.hits(3), 3);
    assert_eq!(
        own.hits(3),
        7,
        "a descriptor's addend overrides the request's"
    );
    assert_eq!(
        zero.hits(3),
        0,
        "and may be zero: a check that charges nothing"
    );
}

#[test]
fn every_file_of_the_directory_also_loads_alone() {
    for entry in std::fs::read_dir(envoy_dir()).unwrap() {
        let path = entry.unwrap().path();
        let rules = RuleSet::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rules.domains().count(), 1, "{}", path.display());
    }
}
