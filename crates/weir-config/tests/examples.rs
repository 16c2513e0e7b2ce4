//! Every example rule file shipped in `config/` loads, and `RuleSet::example()` is
//! `config/example.yaml`, with the rules its comments promise.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::PathBuf;
use std::time::Duration;

use weir_config::{Descriptor, Format, RuleSet};
use weir_core::FailurePolicy;

fn config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config")
}

#[test]
fn every_example_file_loads() {
    // The rule files this crate ships: config/example.yaml and config/envoy/*.yaml.
    let mut files = vec![config_dir().join("example.yaml")];
    for entry in std::fs::read_dir(config_dir().join("envoy")).unwrap() {
        files.push(entry.unwrap().path());
    }
    for file in &files {
        RuleSet::load(file).unwrap_or_else(|e| panic!("{e}"));
    }
    assert_eq!(files.len(), 10, "example.yaml and the nine envoy examples");
    RuleSet::load(&config_dir().join("envoy")).unwrap();
}

#[test]
fn the_embedded_example_is_config_example_yaml() {
    let from_disk = RuleSet::load(&config_dir().join("example.yaml")).unwrap();
    let embedded = RuleSet::example();
    assert!(!embedded.is_empty());
    let ids = |set: &RuleSet| {
        set.rules()
            .iter()
            .map(|r| r.id.to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&embedded), ids(&from_disk));
}

#[test]
fn the_example_shows_what_its_comments_say() {
    let rules = RuleSet::example();
    let rule = |id: &str| rules.rule(id).unwrap_or_else(|| panic!("no rule {id}"));

    let per_ip = rule("api.remote_address");
    assert_eq!(per_ip.algorithm(), "gcra");
    assert_eq!(per_ip.capacity(), Some(40));

    let per_user = rule("api.user_id");
    assert_eq!(per_user.window(), Some(Duration::from_secs(3600)));
    assert_eq!(per_user.on_failure(), Some(FailurePolicy::LocalFallback));

    let export = rule("api.user_id.path_/v1/export*");
    assert_eq!(export.cost, 10);

    let login = rule("api.login_failures");
    assert!(login.rule().unwrap().lockout().is_some());
    assert_eq!(login.on_failure(), Some(FailurePolicy::FailClosed));

    assert!(rule("api.search_user").shadow);
    assert_eq!(rule("api.api_key").enforce_percent, 10);
    assert_eq!(rule("api.report_tenant").algorithm(), "concurrency");

    let health = rule("api.path_/healthz");
    assert!(health.is_unlimited());
    assert_eq!(health.format, Format::Ratelimit);

    // The enterprise rule replaces the per-user rule when both match one request.
    let matched = rules
        .matches(
            "api",
            &[
                Descriptor::new([("user_id", "alice")]),
                Descriptor::new([("plan", "enterprise"), ("user_id", "alice")]),
            ],
        )
        .unwrap();
    assert!(matched[0].is_none());
    assert_eq!(
        matched[1].as_ref().unwrap().name.as_deref(),
        Some("enterprise_user")
    );

    // An export by one user costs 10 tokens of that user's export bucket.
    let export = rules
        .matches(
            "api",
            &[Descriptor::new([
                ("user_id", "alice"),
                ("path", "/v1/export/csv"),
            ])],
        )
        .unwrap()
        .remove(0)
        .unwrap();
    assert_eq!(export.hits(1), 10);
    assert_eq!(
        export.key.to_string(),
        "api/user_id=alice/path=%2Fv1%2Fexport%2Fcsv"
    );
}

#[test]
fn the_readme_examples_that_are_whole_files_load() {
    let readme = std::fs::read_to_string(config_dir().join("README.md")).unwrap();
    let mut whole = 0;
    for block in readme.split("```yaml\n").skip(1) {
        let yaml = block.split("```").next().unwrap();
        if yaml.starts_with("domain:") {
            RuleSet::parse("README.md", yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
            whole += 1;
        }
    }
    assert!(whole >= 1);
}

/// config/README.md said a request to an unknown domain was refused; `weir serve` answers
/// it `OK`, as envoyproxy/ratelimit does (`weir-server/tests/ratelimit_parity.rs`,
/// `an_unknown_domain_is_ok_on_every_api`). The docs must say what the server does.
#[test]
fn the_readme_says_an_unknown_domain_is_answered_ok() {
    let readme = std::fs::read_to_string(config_dir().join("README.md")).unwrap();
    assert!(!readme.contains("is refused with \"unknown domain"));
    assert!(readme.contains("A request to a domain no file defines is **not** refused"));
}
