//! envoyproxy/ratelimit's rule-file constructs mean in Weir what they mean upstream (issue
//! 28): wildcards anywhere in a value and several in one (`bar*b`, `foo*bar*baz`),
//! `share_threshold` (one counter for every value a wildcard matches, keyed by the pattern
//! as ratelimit keys its cache), `metadata` (accepted, ignored for limiting),
//! `value_to_metric`, and `MERGE_DOMAIN_CONFIG` (a domain over two files merges). The
//! fixtures are Weir's own, written to reproduce each upstream construct; the last test
//! runs upstream's own files, unchanged, from a fetched snapshot of its repository when
//! `WEIR_UPSTREAM_RATELIMIT_GIT` names its git directory (`SKIPPED: …` otherwise).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::{Path, PathBuf};

use weir_config::{Descriptor, Matched, RuleSet};

/// Weir's own file with every wildcard form of ratelimit's `wildcard.yaml` test.
const WILDCARDS: &str = "\
domain: wild
descriptors:
  - key: trailing
    value: foo*
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: exact
    value: foo
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: middle
    value: bar*b
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: several
    value: foo*bar*baz
    rate_limit: {unit: minute, requests_per_unit: 10}
  - key: outer
    value: val1
    descriptors:
      - key: inner
        value: goo*
        rate_limit: {unit: minute, requests_per_unit: 20}
";

fn one(rules: &RuleSet, domain: &str, entries: &[(&str, &str)]) -> Option<Matched> {
    rules
        .matches(domain, &[Descriptor::new(entries.iter().copied())])
        .unwrap()
        .pop()
        .unwrap()
}

/// Issue 28: `bar*b` and `foo*bar*baz` loaded as exact strings, so `barXYZb` passed
/// unlimited. They match as ratelimit's `wildcardMatch` matches (its TestWildcardConfig).
#[test]
fn a_wildcard_anywhere_in_a_value_and_several_in_one_limit() {
    let rules = RuleSet::parse("wild.yaml", WILDCARDS).unwrap();
    let id = |entries: &[(&str, &str)]| one(&rules, "wild", entries).map(|m| m.rule_id);
    for value in ["barab", "bar123b", "barb", "barXYZb"] {
        assert_eq!(
            id(&[("middle", value)]).as_deref(),
            Some("wild.middle_bar*b"),
            "{value}"
        );
    }
    for value in ["bara", "xbarb", "bar"] {
        assert_eq!(id(&[("middle", value)]), None, "{value}");
    }
    for value in ["foo123bar456baz", "foobarbaz"] {
        assert_eq!(
            id(&[("several", value)]).as_deref(),
            Some("wild.several_foo*bar*baz"),
            "{value}"
        );
    }
    for value in ["foo123baz", "foobazbar", "foobar"] {
        assert_eq!(id(&[("several", value)]), None, "{value}");
    }
    assert!(id(&[("trailing", "foo")]).is_some() && id(&[("trailing", "foo1")]).is_some());
    assert_eq!(id(&[("trailing", "fo")]), None);
    assert_eq!(id(&[("exact", "foo1")]), None);
    assert!(id(&[("outer", "val1"), ("inner", "goober")]).is_some());
    assert_eq!(id(&[("outer", "val1"), ("inner", "go")]), None);
    // Without share_threshold each value keeps its own counter.
    let key = |v: &str| one(&rules, "wild", &[("middle", v)]).unwrap().key;
    assert_ne!(key("barab"), key("barcb"));
}

/// ratelimit's `share_threshold.yaml` constructs: values matched by one wildcard with
/// `share_threshold: true` count against one key (the pattern's), at any level, nested or
/// not; values of another wildcard, or without the flag, do not.
#[test]
fn share_threshold_shares_one_counter_across_the_values_of_a_wildcard() {
    let rules = RuleSet::parse(
        "share.yaml",
        "\
domain: share
descriptors:
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: minute, requests_per_unit: 100}
  - key: nested
    value: parent
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 200}
  - key: files
    value: top/*
    share_threshold: true
    descriptors:
      - key: files
        value: nested/*
        share_threshold: true
        rate_limit: {unit: minute, requests_per_unit: 300}
  - key: route
    value: api/*
    share_threshold: true
    value_to_metric: true
    descriptors:
      - key: method
        rate_limit: {unit: minute, requests_per_unit: 60}
  - key: own
    value: own/*
    rate_limit: {unit: minute, requests_per_unit: 5}
",
    )
    .unwrap();
    let key = |entries: &[(&str, &str)]| one(&rules, "share", entries).unwrap().key;
    assert_eq!(
        key(&[("files", "files/a.pdf")]),
        key(&[("files", "files/b.csv")])
    );
    assert_eq!(
        key(&[("files", "files/a")]).to_string(),
        "share/files=files%2F*",
        "keyed by the pattern, as ratelimit's cache key"
    );
    assert_eq!(
        key(&[("nested", "parent"), ("files", "nested/x")]),
        key(&[("nested", "parent"), ("files", "nested/y")])
    );
    // Both levels shared: one counter for every (top/*, nested/*) pair.
    assert_eq!(
        key(&[("files", "top/1"), ("files", "nested/1")]),
        key(&[("files", "top/2"), ("files", "nested/2")])
    );
    // A shared wildcard above, a plain key below: the shared level counts as one, the
    // method keeps its values.
    assert_eq!(
        key(&[("route", "api/users"), ("method", "GET")]),
        key(&[("route", "api/orders"), ("method", "GET")])
    );
    assert_ne!(
        key(&[("route", "api/users"), ("method", "GET")]),
        key(&[("route", "api/users"), ("method", "POST")])
    );
    assert_ne!(key(&[("own", "own/a")]), key(&[("own", "own/b")]));
}

/// ratelimit's `metadata.yaml` and `example.yaml` constructs: `metadata:` (any YAML under
/// it) is accepted and changes no limit.
#[test]
fn metadata_is_accepted_and_changes_no_limit() {
    let rules = RuleSet::parse(
        "meta.yaml",
        "\
domain: meta
descriptors:
  - key: key1
    value: value1
    descriptors:
      - key: subkey1
        rate_limit: {unit: second, requests_per_unit: 5}
        metadata:
          name: service_1
  - key: key2
    rate_limit: {unit: minute, requests_per_unit: 20}
    metadata:
      service_with_quota:
        name: service_2
        tags: [a, 1, true, {nested: [x]}]
",
    )
    .unwrap();
    let limit = |entries: &[(&str, &str)]| {
        one(&rules, "meta", entries)
            .unwrap()
            .rate_limit
            .unwrap()
            .requests_per_unit
    };
    assert_eq!(limit(&[("key1", "value1"), ("subkey1", "x")]), 5);
    assert_eq!(limit(&[("key2", "y")]), 20);
}

/// `MERGE_DOMAIN_CONFIG=true` (ratelimit's TestDomainMerge): one domain over two files is
/// one tree; without it, the domain is refused (TestDuplicateDomain); with it, the same
/// top-level key in both is refused (TestDuplicateKeyDomainMerge).
#[test]
fn merge_domains_merges_one_domain_over_two_files() {
    let first = RuleSet::parse(
        "one.yaml",
        "domain: m\ndescriptors:\n  - key: key1\n    value: value1\n    rate_limit: {unit: minute, requests_per_unit: 10}\n",
    )
    .unwrap();
    let second = RuleSet::parse(
        "two.yaml",
        "domain: m\ndescriptors:\n  - key: key2\n    value: value2\n    rate_limit: {unit: minute, requests_per_unit: 20}\n    descriptors:\n      - key: sub\n        rate_limit: {unit: second, requests_per_unit: 3}\n",
    )
    .unwrap();
    let other = RuleSet::parse(
        "three.yaml",
        "domain: other\ndescriptors:\n  - key: k\n    rate_limit: {unit: hour, requests_per_unit: 7}\n",
    )
    .unwrap();
    let refused = first.clone().merge(second.clone()).unwrap_err().to_string();
    assert_eq!(
        refused,
        "two.yaml: domain 'm' is already defined in one.yaml"
    );
    let merged = first
        .clone()
        .merge_domains(other)
        .unwrap()
        .merge_domains(second.clone())
        .unwrap();
    let limit = |domain: &str, entries: &[(&str, &str)]| {
        one(&merged, domain, entries).map(|m| (m.rule_id.to_string(), m.rule().unwrap().limit()))
    };
    assert_eq!(
        limit("m", &[("key1", "value1")]),
        Some(("m.key1_value1".into(), 10))
    );
    assert_eq!(
        limit("m", &[("key2", "value2")]),
        Some(("m.key2_value2".into(), 20))
    );
    assert_eq!(
        limit("m", &[("key2", "value2"), ("sub", "x")]),
        Some(("m.key2_value2.sub".into(), 3))
    );
    assert_eq!(limit("other", &[("k", "v")]), Some(("other.k".into(), 7)));
    assert_eq!(merged.rules().len(), 4);
    let again = first.clone().merge_domains(first).unwrap_err().to_string();
    assert!(
        again.contains("duplicate descriptor composite key 'm.key1_value1'"),
        "{again}"
    );
}

/// Files of ratelimit's repository, read from a fetched snapshot: `git show HEAD:<path>`.
struct Upstream {
    git: PathBuf,
    dir: PathBuf,
}

impl Upstream {
    fn open(test: &str) -> Option<Upstream> {
        let Some(git) = std::env::var_os("WEIR_UPSTREAM_RATELIMIT_GIT").map(PathBuf::from) else {
            println!("SKIPPED: {test}: WEIR_UPSTREAM_RATELIMIT_GIT does not name envoyproxy/ratelimit's git directory");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("weir-upstream-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Some(Upstream { git, dir })
    }

    /// Writes the file `path` of upstream's HEAD under this test's directory, unchanged.
    fn file(&self, path: &str) -> PathBuf {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&self.git)
            .args(["show", &format!("HEAD:{path}")])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git show {path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let file = self.dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, out.stdout).unwrap();
        file
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Upstream's own example and test rule files, unchanged: the ones ratelimit loads load in
/// Weir and mean the same; the ones its config_test.go expects to fail are refused.
#[test]
fn upstreams_own_files_load_and_mean_what_they_mean_upstream() {
    let Some(up) = Upstream::open("own-files") else {
        return;
    };
    for path in [
        "examples/ratelimit/config/example.yaml",
        "examples/ratelimit/config/config.yaml",
        "test/config/basic_config.yaml",
        "test/config/metadata.yaml",
        "test/config/shadowmode_config.yaml",
        "test/config/share_threshold.yaml",
        "test/config/wildcard.yaml",
        "test/config/merge_domain_key1.yaml",
        "test/config/merge_domain_key2.yaml",
        "test/integration/runtime/current/ratelimit/config/another.yaml",
        "test/integration/runtime/current/ratelimit/config/basic.yaml",
        "test/integration/runtime/current/ratelimit/config/share_threshold.yaml",
        "test/integration/runtime/current/ratelimit/reload.yaml",
    ] {
        RuleSet::load(&up.file(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
    for path in [
        "test/config/bad_limit_unit.yaml",
        "test/config/bad_yaml.yaml",
        "test/config/duplicate_key.yaml",
        "test/config/empty_domain.yaml",
        "test/config/empty_key.yaml",
        "test/config/misspelled_key.yaml",
        "test/config/misspelled_key2.yaml",
        "test/config/non_map_list.yaml",
        "test/config/non_string_key.yaml",
        "test/config/replaces_empty.yaml",
        "test/config/replaces_self.yaml",
        "test/config/unlimited_with_unit.yaml",
    ] {
        let file = up.file(path);
        let err = RuleSet::load(&file)
            .err()
            .unwrap_or_else(|| panic!("{path} loaded"));
        assert!(
            err.to_string().starts_with(&file.display().to_string()),
            "{err}"
        );
    }
    let wild = RuleSet::load(&up.dir.join("test/config/wildcard.yaml")).unwrap();
    let m = one(&wild, "test-domain", &[("midWild", "barab")]).expect("barab matches bar*b");
    assert_eq!(m.rule().unwrap().limit(), 20);
    let m = one(&wild, "test-domain", &[("multiWild", "foo123bar456baz")]).unwrap();
    assert_eq!(m.rule().unwrap().limit(), 10);
    assert!(one(&wild, "test-domain", &[("multiWild", "foo123baz")]).is_none());
    let share = RuleSet::load(&up.dir.join("test/config/share_threshold.yaml")).unwrap();
    let key = |v: &str| one(&share, "test-domain", &[("files", v)]).unwrap().key;
    assert_eq!(key("files/a.pdf"), key("files/b.csv"));
    let merged = RuleSet::load(&up.dir.join("test/config/merge_domain_key1.yaml"))
        .unwrap()
        .merge_domains(RuleSet::load(&up.dir.join("test/config/merge_domain_key2.yaml")).unwrap())
        .unwrap();
    assert!(one(&merged, "test-domain", &[("key1", "value1")]).is_some());
    assert!(one(&merged, "test-domain", &[("key2", "value2")]).is_some());
    let basic = RuleSet::load(&up.dir.join("test/config/basic_config.yaml")).unwrap();
    let twice = RuleSet::load(&up.file("test/config/duplicate_domain.yaml")).unwrap();
    let err = basic.merge(twice).unwrap_err().to_string();
    assert!(
        err.contains("domain 'test-domain' is already defined in"),
        "{err}"
    );
    let example = RuleSet::load(&up.dir.join("examples/ratelimit/config/example.yaml")).unwrap();
    let quota = one(&example, "rl", &[("service", "service_1")]).unwrap();
    assert!(quota.quota_mode && quota.rule().unwrap().limit() == 1);
    assert!(Path::new(&up.dir).exists());
}
