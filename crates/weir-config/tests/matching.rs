//! Matching details beyond the README scenarios: wildcards at any depth, no backtracking,
//! the first wildcard in file order, `replaces` across a request, a Weir rule's policies
//! carried into the match, and the nesting limit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use weir_config::bounds::MAX_DEPTH;
use weir_config::{Descriptor, Matched, RuleSet};

const TREE: &str = r#"
domain: shop
descriptors:
  - key: tenant
    value: acme
    rate_limit: {unit: second, requests_per_unit: 1, name: acme}
  - key: tenant
    descriptors:
      - key: path
        value: /cart/*
        rate_limit: {unit: second, requests_per_unit: 2}
      - key: path
        value: /cart/checkout*
        rate_limit: {unit: second, requests_per_unit: 3}
      - key: path
        rule:
          algorithm: gcra
          rate: 4
          per: 1s
          burst: 8
          cost: 3
          enforce_percent: 25
          shadow: true
          name: tenant_path
          replaces: [{name: acme}]
"#;

fn rules() -> RuleSet {
    RuleSet::parse("shop.yaml", TREE).unwrap()
}

fn limit(entries: &[(&str, &str)]) -> Option<u64> {
    matched(entries).map(|m| m.rule().unwrap().limit())
}

fn matched(entries: &[(&str, &str)]) -> Option<Matched> {
    rules()
        .matches("shop", &[Descriptor::new(entries.iter().copied())])
        .unwrap()
        .remove(0)
}

#[test]
fn wildcards_work_below_the_root_and_the_first_in_file_order_wins() {
    assert_eq!(
        limit(&[("tenant", "globex"), ("path", "/cart/items")]),
        Some(2)
    );
    assert_eq!(
        limit(&[("tenant", "globex"), ("path", "/cart/checkout")]),
        Some(2)
    );
    assert_eq!(limit(&[("tenant", "globex"), ("path", "/orders")]), Some(8));
}

#[test]
fn the_walk_never_backtracks() {
    // `tenant: acme` matches exactly and has no children, so a second entry reaches
    // nothing, even though the key-only `tenant` node has a matching child.
    assert_eq!(limit(&[("tenant", "acme")]), Some(1));
    assert_eq!(limit(&[("tenant", "acme"), ("path", "/orders")]), None);
}

#[test]
fn a_weir_rule_brings_its_policies() {
    let m = matched(&[("tenant", "globex"), ("path", "/orders")]).unwrap();
    assert_eq!(m.cost, 3);
    assert_eq!(m.hits(2), 6);
    assert_eq!(m.enforce_percent, 25);
    assert!(m.shadow);
    assert_eq!(m.name.as_deref(), Some("tenant_path"));
    assert_eq!(m.rule_id.as_ref(), "shop.tenant.path");
    assert_eq!(m.key.to_string(), "shop/tenant=globex/path=%2Forders");
}

#[test]
fn replaces_applies_only_when_both_rules_match_one_request() {
    let acme = Descriptor::new([("tenant", "acme")]);
    let path = Descriptor::new([("tenant", "globex"), ("path", "/orders")]);
    let rules = rules();
    let alone = rules.matches("shop", std::slice::from_ref(&acme)).unwrap();
    assert!(alone[0].is_some());
    let together = rules.matches("shop", &[acme, path]).unwrap();
    assert!(together[0].is_none());
    assert!(together[1].is_some());
}

#[test]
fn two_rules_that_replace_each_other_both_drop() {
    let rules = RuleSet::parse(
        "m.yaml",
        "domain: m\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 1, name: a, replaces: [{name: b}]}\n  - key: b\n    rate_limit: {unit: second, requests_per_unit: 1, name: b, replaces: [{name: a}]}\n",
    )
    .unwrap();
    let both = rules
        .matches(
            "m",
            &[Descriptor::new([("a", "1")]), Descriptor::new([("b", "1")])],
        )
        .unwrap();
    assert!(both.iter().all(Option::is_none));
}

#[test]
fn nesting_deeper_than_the_limit_is_refused() {
    let nested = |depth: usize| {
        let mut yaml = String::from("domain: deep\ndescriptors:\n");
        for level in 0..depth {
            let pad = "  ".repeat(2 * level);
            yaml.push_str(&format!("{pad}  - key: k{level}\n"));
            if level + 1 < depth {
                yaml.push_str(&format!("{pad}    descriptors:\n"));
            } else {
                yaml.push_str(&format!(
                    "{pad}    rate_limit: {{unit: second, requests_per_unit: 1}}\n"
                ));
            }
        }
        yaml
    };
    let ok = RuleSet::parse("deep.yaml", &nested(MAX_DEPTH)).unwrap();
    let entries: Vec<(String, String)> = (0..MAX_DEPTH)
        .map(|i| (format!("k{i}"), "v".into()))
        .collect();
    let deepest = ok.matches("deep", &[Descriptor::new(entries)]).unwrap();
    assert!(deepest[0].is_some());
    let err = RuleSet::parse("deep.yaml", &nested(MAX_DEPTH + 1)).unwrap_err();
    assert!(
        err.to_string()
            .ends_with(&format!("descriptors nest deeper than {MAX_DEPTH} levels")),
        "{err}"
    );
    // Far deeper files stop in the YAML parser's depth budget.
    let err = RuleSet::parse("deep.yaml", &nested(4 * MAX_DEPTH)).unwrap_err();
    assert!(
        err.to_string().contains("exceeds the YAML resource budget"),
        "{err}"
    );
}
