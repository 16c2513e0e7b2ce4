//! ratelimit's quota mode as its examples write it (Weir's own fixture,
//! `tests/fixtures/quota/two_services.yaml`; no upstream file is copied) loads, and carries
//! what its service reads from it. The server's answers to it are in
//! `weir-server/tests/ratelimit_parity.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::PathBuf;

use weir_config::{Descriptor, RuleSet, Unit};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/quota")
        .join(name)
}

/// `quota_mode` used to be an unknown field, so ratelimit's quota example failed the whole
/// load (and a directory holding it kept none of its domains).
#[test]
fn ratelimits_quota_example_loads_with_quota_mode() {
    let rules = RuleSet::load(&fixture("two_services.yaml")).unwrap_or_else(|e| panic!("{e}"));
    let quota: Vec<(&str, bool)> = rules
        .rules()
        .iter()
        .map(|r| (r.id.as_ref(), r.quota_mode))
        .collect();
    assert_eq!(
        quota,
        [
            ("quota.service_service_1", true),
            ("quota.service_service_2", true)
        ]
    );
    let matched = rules
        .matches(
            "quota",
            &[
                Descriptor::new([("service", "service_1")]),
                Descriptor::new([("service", "service_2")]),
            ],
        )
        .unwrap();
    let [Some(one), Some(two)] = &matched[..] else {
        panic!("both descriptors match: {matched:?}");
    };
    assert!(one.quota_mode && two.quota_mode);
    let per = |m: &weir_config::Matched| m.rate_limit.map(|r| (r.requests_per_unit, r.unit));
    assert_eq!(per(one), Some((1, Unit::Minute)));
    assert_eq!(per(two), Some((2, Unit::Minute)));
}

#[test]
fn quota_mode_is_off_unless_written_and_never_on_a_limit_override() {
    let rules = RuleSet::parse(
        "q.yaml",
        "domain: d\ndescriptors:\n  - key: plain\n    rate_limit: {unit: second, requests_per_unit: 1}\n  \
         - key: weir\n    quota_mode: true\n    rule: {algorithm: gcra, rate: 1, per: 1s, burst: 1}\n",
    )
    .unwrap();
    let matched = rules
        .matches(
            "d",
            &[
                Descriptor::new([("plain", "x")]),
                Descriptor::new([("weir", "x")]),
                Descriptor::new([("weir", "x")]).with_limit(weir_config::LimitOverride {
                    requests_per_unit: 5,
                    unit: Unit::Second,
                }),
            ],
        )
        .unwrap();
    let quota: Vec<bool> = matched
        .iter()
        .map(|m| m.as_ref().unwrap().quota_mode)
        .collect();
    assert_eq!(quota, [false, true, false], "a Weir rule takes it too");
}

#[test]
fn quota_mode_must_be_a_boolean() {
    let error = RuleSet::parse(
        "q.yaml",
        "domain: d\ndescriptors:\n  - key: k\n    quota_mode: sometimes\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.starts_with("q.yaml:4: descriptors[0].quota_mode: "),
        "{error}"
    );
}
