//! A rule's `warmup` and `cold_factor`: read from the YAML `rule:` block into GCRA's and the
//! token bucket's warm-up, and refused on every other algorithm with an error naming the
//! file, line and field, and the reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use weir_config::RuleSet;
use weir_core::{Rule, WarmUp};

fn rule_block(body: &str) -> String {
    format!("domain: api\ndescriptors:\n  - key: user\n    rule:\n{body}")
}

fn rule_of(body: &str) -> Result<Rule, String> {
    let set = RuleSet::parse("api.yaml", &rule_block(body)).map_err(|e| e.to_string())?;
    Ok(*set.rules()[0].rule().unwrap())
}

fn warmup_of(body: &str) -> Option<WarmUp> {
    rule_of(body).unwrap().warmup().copied()
}

#[test]
fn gcra_and_token_buckets_warm_up() {
    let gcra = "      algorithm: gcra\n      rate: 100\n      per: 1s\n      burst: 100\n";
    assert_eq!(warmup_of(gcra), None);
    let warm = warmup_of(&format!("{gcra}      warmup: 1m30s\n")).unwrap();
    assert_eq!(warm.period_ns(), 90_000_000_000);
    assert_eq!(warm.cold_factor(), WarmUp::DEFAULT_COLD_FACTOR);
    let colder = warmup_of(&format!("{gcra}      warmup: 30s\n      cold_factor: 5\n")).unwrap();
    assert_eq!(colder.cold_factor(), 5);
    let bucket = "      algorithm: token_bucket\n      capacity: 10\n      rate: 10\n      per: 1s\n      warmup: 30s\n";
    let want = Rule::token_bucket(10, 10, Duration::from_secs(1))
        .unwrap()
        .with_warmup(Duration::from_secs(30), 3)
        .unwrap();
    assert_eq!(rule_of(bucket).unwrap().algorithm(), want.algorithm());
}

#[test]
fn a_sliding_log_refuses_warm_up_and_says_why() {
    let log =
        "      algorithm: sliding_log\n      limit: 10\n      window: 1s\n      warmup: 30s\n";
    let err = rule_of(log).unwrap_err();
    assert_eq!(
        err,
        "api.yaml:8: descriptors[0].rule.warmup: warmup: only gcra and token_bucket warm up: a \
         window counts requests against a limit per window and has no rate to ramp"
    );
    let queue = "      algorithm: leaky_queue\n      rate: 10\n      per: 1s\n      max_depth: 5\n      cold_factor: 2\n";
    let err = rule_of(queue).unwrap_err();
    assert!(err.contains("rule.warmup: warmup: only gcra"), "{err}");
    assert!(err.contains("promises each request its delay"), "{err}");
}

#[test]
fn warm_up_values_are_checked() {
    let gcra = "      algorithm: gcra\n      rate: 100\n      per: 1s\n      burst: 100\n";
    let err = rule_of(&format!("{gcra}      cold_factor: 3\n")).unwrap_err();
    assert!(
        err.contains("rule.cold_factor: cold_factor: applies only with warmup"),
        "{err}"
    );
    let err = rule_of(&format!("{gcra}      warmup: 30s\n      cold_factor: 1\n")).unwrap_err();
    assert!(err.contains("must be at least 2"), "{err}");
    let err = rule_of(&format!("{gcra}      warmup: 0s\n")).unwrap_err();
    assert!(err.contains("rule.warmup"), "{err}");
    let err = rule_of(&format!("{gcra}      warmup: soon\n")).unwrap_err();
    assert!(err.contains("rule.warmup"), "{err}");
}
