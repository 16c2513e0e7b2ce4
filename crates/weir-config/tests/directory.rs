//! Loading a directory as ratelimit does: every `*.yaml` / `*.yml` file, one domain each,
//! hidden files, other extensions and subdirectories skipped; a domain in two files is an
//! error naming both; `merge` follows the same rule.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::PathBuf;

use weir_config::{ConfigError, RuleSet};

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dirs")
        .join(name)
}

#[test]
fn a_directory_loads_every_rule_file_and_nothing_else() {
    let rules = RuleSet::load(&dir("mixed")).unwrap();
    assert_eq!(rules.domains().collect::<Vec<_>>(), ["one", "two"]);
    assert_eq!(rules.rules().len(), 2);
    assert_eq!(
        rules.domain_file("two"),
        Some(dir("mixed").join("two.yml").as_path())
    );
    assert_eq!(rules.rules()[1].file, dir("mixed").join("two.yml"));
}

#[test]
fn a_domain_in_two_files_is_an_error_naming_both() {
    let err = RuleSet::load(&dir("duplicate")).unwrap_err();
    assert!(matches!(err, ConfigError::DuplicateDomain { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: domain 'shared' is already defined in {}",
            dir("duplicate").join("b.yml").display(),
            dir("duplicate").join("a.yaml").display()
        )
    );
}

#[test]
fn a_directory_without_rule_files_is_an_error() {
    let err = RuleSet::load(&dir("empty")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}: no *.yaml or *.yml rule files", dir("empty").display())
    );
}

#[test]
fn a_missing_path_is_an_io_error_naming_it() {
    let missing = dir("does-not-exist");
    let err = RuleSet::load(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }));
    assert!(err
        .to_string()
        .starts_with(&format!("{}: cannot read: ", missing.display())));
}

#[test]
fn merging_keeps_rules_in_domain_order_and_refuses_duplicates() {
    let b = RuleSet::parse("b.yaml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n").unwrap();
    let a = RuleSet::parse("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n").unwrap();
    let merged = b.clone().merge(a).unwrap();
    let ids: Vec<&str> = merged.rules().iter().map(|r| r.id.as_ref()).collect();
    assert_eq!(ids, ["a.k", "b.k"]);
    // Matching still finds each domain's own rules after the merge.
    let m = merged
        .matches("b", &[weir_config::Descriptor::new([("k", "v")])])
        .unwrap();
    assert_eq!(m[0].as_ref().unwrap().rule().unwrap().limit(), 2);
    assert!(matches!(
        merged.merge(b),
        Err(ConfigError::DuplicateDomain { .. })
    ));
}
