//! Bad requests are errors that say what was wrong and the limit; a request no rule covers
//! is not an error. Also: limit overrides, unknown domains and the keys matches build.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_config::bounds::{
    MAX_DESCRIPTORS, MAX_DOMAIN_LEN, MAX_ENTRIES, MAX_HITS_ADDEND, MAX_KEY_LEN, MAX_VALUE_LEN,
};
use weir_config::{Descriptor, Limit, LimitOverride, MatchError, RuleSet, Unit};
use weir_core::Key;

fn rules() -> RuleSet {
    RuleSet::parse(
        "api.yaml",
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n",
    )
    .unwrap()
}

fn user(value: &str) -> Descriptor {
    Descriptor::new([("user", value)])
}

fn error(domain: &str, descriptors: &[Descriptor]) -> String {
    rules()
        .matches(domain, descriptors)
        .unwrap_err()
        .to_string()
}

#[test]
fn every_request_limit_names_itself() {
    assert_eq!(error("", &[user("a")]), "domain is empty");
    assert_eq!(
        error(&"d".repeat(MAX_DOMAIN_LEN + 1), &[user("a")]),
        "domain is 257 bytes, above the maximum of 256"
    );
    assert_eq!(error("api", &[]), "no descriptors");
    assert_eq!(
        error("api", &vec![user("a"); MAX_DESCRIPTORS + 1]),
        "65 descriptors, above the maximum of 64"
    );
    let many = Descriptor::new((0..=MAX_ENTRIES).map(|i| (format!("k{i}"), "v".to_string())));
    assert_eq!(
        error("api", &[user("a"), many]),
        "descriptors[1]: 17 entries, above the maximum of 16"
    );
    let long_key = Descriptor::new([("k".repeat(MAX_KEY_LEN + 1), "v".to_string())]);
    assert_eq!(
        error("api", &[long_key]),
        "descriptors[0].entries[0]: key is 257 bytes, above the maximum of 256"
    );
    let long_value = Descriptor::new([("a", "b"), ("user", &*"v".repeat(MAX_VALUE_LEN + 1))]);
    assert_eq!(
        error("api", &[long_value]),
        "descriptors[0].entries[1]: value is 1025 bytes, above the maximum of 1024"
    );
    assert_eq!(
        error("api", &[user("a").with_hits_addend(MAX_HITS_ADDEND + 1)]),
        "descriptors[0].hits_addend is 1000000001, above the maximum of 1000000000"
    );
}

#[test]
fn limits_are_checked_before_the_domain() {
    assert_eq!(error("nope", &[]), "no descriptors");
}

#[test]
fn an_unknown_domain_is_an_error_naming_it() {
    assert_eq!(
        rules().matches("billing", &[user("a")]),
        Err(MatchError::UnknownDomain("billing".into()))
    );
    assert_eq!(error("billing", &[user("a")]), "unknown domain 'billing'");
}

#[test]
fn a_descriptor_no_rule_covers_is_none() {
    let matched = rules()
        .matches(
            "api",
            &[
                Descriptor::new([("other", "x")]),
                Descriptor::default(),
                user("a"),
            ],
        )
        .unwrap();
    assert!(matched[0].is_none());
    assert!(
        matched[1].is_none(),
        "a descriptor without entries matches nothing"
    );
    assert!(matched[2].is_some());
}

#[test]
fn a_limit_override_replaces_the_configured_limit() {
    let over = user("a").with_limit(LimitOverride {
        requests_per_unit: 3,
        unit: Unit::Hour,
    });
    let block = Descriptor::new([("anything", "x")]).with_limit(LimitOverride {
        requests_per_unit: 0,
        unit: Unit::Second,
    });
    let matched = rules().matches("api", &[over, block]).unwrap();
    let over = matched[0].as_ref().unwrap();
    assert_eq!(over.rule().unwrap().limit(), 3);
    assert_eq!(over.rule().unwrap().window(), Duration::from_secs(3600));
    assert_eq!(over.rule_id.as_ref(), "api.limit_override");
    // Its own key space: an override never touches the configured rule's record.
    assert_ne!(
        over.key,
        rules().matches("api", &[user("a")]).unwrap()[0]
            .as_ref()
            .unwrap()
            .key
    );
    let block = matched[1].as_ref().unwrap();
    assert_eq!(
        block.limit,
        Limit::Deny {
            window: Duration::from_secs(1)
        }
    );
}

/// Issue 26: an override carries the configured match it stands in for, whose guard
/// (block, lockout, deny) the server still honours; its rule is of the one override scope.
#[test]
fn a_limit_override_carries_the_configured_match_behind_it() {
    let rules = RuleSet::parse(
        "api.yaml",
        "domain: api
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: route
    rule: {algorithm: gcra, rate: 5, per: 1s, burst: 5, name: route}
  - key: tier
    rule: {algorithm: gcra, rate: 50, per: 1s, burst: 50, replaces: [{name: route}]}
",
    )
    .unwrap();
    let over = |d: Descriptor| {
        d.with_limit(LimitOverride {
            requests_per_unit: 1000,
            unit: Unit::Second,
        })
    };
    let matched = rules
        .matches(
            "api",
            &[
                over(user("a")),
                over(Descriptor::new([("ip", "10.0.0.1")])),
                over(Descriptor::new([("other", "x")])),
            ],
        )
        .unwrap();
    let configured = |i: usize| matched[i].as_ref().unwrap().configured.as_deref();
    let plain = rules
        .matches("api", &[user("a")])
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(
        configured(0),
        Some(&plain),
        "the rule, key and roll-out as matched"
    );
    assert!(matches!(configured(1).unwrap().limit, Limit::Deny { .. }));
    assert_eq!(
        configured(2),
        None,
        "nothing configured: the override alone"
    );
    assert_eq!(plain.configured, None);
    for m in matched.iter().flatten() {
        assert_eq!(
            m.rule().unwrap().scope(),
            weir_config::limit_override_scope()
        );
    }
    // A configured rule another descriptor replaces guards nothing, as it limits nothing.
    let route = over(Descriptor::new([("route", "/a")]));
    let both = rules
        .matches("api", &[route.clone(), Descriptor::new([("tier", "gold")])])
        .unwrap();
    assert_eq!(both[0].as_ref().unwrap().configured, None);
    let alone = rules.matches("api", &[route]).unwrap();
    assert!(alone[0].as_ref().unwrap().configured.is_some());
}

#[test]
fn keys_are_namespaced_escaped_and_bounded() {
    let rules = rules();
    let key = |value: &str| {
        rules.matches("api", &[user(value)]).unwrap()[0]
            .as_ref()
            .unwrap()
            .key
            .clone()
    };
    assert_eq!(key("alice").to_string(), "api/user=alice");
    assert_eq!(key("a/b=c").to_string(), "api/user=a%2Fb%3Dc");
    let longest = key(&"x".repeat(MAX_VALUE_LEN));
    assert!(longest.as_bytes().len() <= Key::MAX_LEN);
    assert_ne!(longest, key(&format!("{}y", "x".repeat(MAX_VALUE_LEN - 1))));
}
