//! `WEIR.CHECK` against rule files: the verdicts `POST /v1/check` gives (matched,
//! unmatched, unknown domain, unlimited, `requests_per_unit: 0`, shadow, hits above the
//! capacity, `HITS n`), as a RESP2 flat array and as a RESP3 map, on a real socket with
//! the `redis` crate under a `ManualClock`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::start_engine;
use redis::Value;
use weir_engine::{EngineSettings, RuleSource};
use weir_resp::Settings;

const RULES: &str = r#"
domain: api
descriptors:
  - key: user
    rule: {algorithm: gcra, rate: 2, per: 1s, burst: 2, name: per_user}
  - key: free
    rate_limit: {unlimited: true}
  - key: blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: trial
    rule: {algorithm: fixed_window, limit: 1, window: 1m, shadow: true}
  - key: upload
    rule: {algorithm: token_bucket, capacity: 10, rate: 1, per: 1s}
"#;

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        Value::Nil => "nil".into(),
        other => panic!("unexpected {other:?}"),
    }
}

/// The reply as (name, value) pairs, whether a RESP3 map or a RESP2 flat array.
fn fields(reply: Value) -> Vec<(String, String)> {
    match reply {
        Value::Map(pairs) => pairs.iter().map(|(k, v)| (text(k), text(v))).collect(),
        Value::Array(items) => items
            .chunks(2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
        other => panic!("not a map: {other:?}"),
    }
}

async fn check(
    con: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> Vec<(String, String)> {
    let mut cmd = redis::cmd("WEIR.CHECK");
    for arg in args {
        cmd.arg(*arg);
    }
    fields(cmd.query_async(con).await.unwrap())
}

fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
    expected
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn rules() -> RuleSource {
    RuleSource::Inline {
        name: "rules.yaml",
        yaml: RULES,
    }
}

/// The front end over an engine on [`RULES`], under the global shadow mode or not.
async fn server(shadow: bool) -> common::Server {
    let mut engine = EngineSettings::default();
    engine.rules = rules();
    engine.shadow = shadow;
    start_engine(engine, Settings::default()).await.0
}

#[tokio::test]
async fn a_matched_rule_allows_then_denies_with_v1_checks_fields() {
    let server = server(false).await;
    for resp3 in [false, true] {
        let mut con = server.client(resp3).await;
        let user = if resp3 { "bob" } else { "alice" };
        let ok = |remaining: &str, reset: &str| {
            pairs(&[
                ("overall_code", "OK"),
                ("code", "OK"),
                ("rule", "api.user"),
                ("name", "per_user"),
                ("limit", "2"),
                ("remaining", remaining),
                ("reset_after_ms", reset),
                ("retry_after_ms", "0"),
            ])
        };
        assert_eq!(
            check(&mut con, &["api", "user", user]).await,
            ok("1", "500")
        );
        assert_eq!(
            check(&mut con, &["api", "user", user]).await,
            ok("0", "1000")
        );
        let denied = pairs(&[
            ("overall_code", "OVER_LIMIT"),
            ("code", "OVER_LIMIT"),
            ("rule", "api.user"),
            ("name", "per_user"),
            ("limit", "2"),
            ("remaining", "0"),
            ("reset_after_ms", "1000"),
            ("retry_after_ms", "500"),
        ]);
        assert_eq!(check(&mut con, &["api", "user", user]).await, denied);
    }
    server.advance(Duration::from_millis(500));
    let mut con = server.client(false).await;
    assert_eq!(
        check(&mut con, &["api", "user", "alice"]).await[1],
        ("code".into(), "OK".into())
    );
    server.stop().await;
}

#[tokio::test]
async fn unmatched_unknown_unlimited_and_blocked_descriptors() {
    let server = server(false).await;
    let mut con = server.client(true).await;
    let unmatched = pairs(&[("overall_code", "OK"), ("code", "OK"), ("rule", "nil")]);
    assert_eq!(check(&mut con, &["api", "nobody", "x"]).await, unmatched);
    assert_eq!(
        check(&mut con, &["elsewhere", "user", "x"]).await,
        unmatched
    );
    assert_eq!(
        check(&mut con, &["api", "free", "x"]).await,
        pairs(&[
            ("overall_code", "OK"),
            ("code", "OK"),
            ("rule", "api.free"),
            ("unlimited", "1")
        ])
    );
    // requests_per_unit: 0 denies until the end of the minute (START is a whole minute + 20 s).
    let blocked = check(&mut con, &["api", "blocked", "x"]).await;
    assert_eq!(blocked[0], ("overall_code".into(), "OVER_LIMIT".into()));
    assert!(
        blocked.contains(&("retry_after_ms".into(), "40000".into())),
        "{blocked:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn shadow_rules_and_the_servers_shadow_mode_report_without_enforcing() {
    let server = server(false).await;
    let mut con = server.client(false).await;
    check(&mut con, &["api", "trial", "t"]).await;
    let shadowed = check(&mut con, &["api", "trial", "t"]).await;
    assert_eq!(
        shadowed[..2],
        pairs(&[("overall_code", "OK"), ("code", "OK")])
    );
    assert!(
        shadowed.contains(&("shadow_denied".into(), "1".into())),
        "{shadowed:?}"
    );
    server.stop().await;

    let server = self::server(true).await;
    let mut con = server.client(false).await;
    for _ in 0..2 {
        check(&mut con, &["api", "user", "u"]).await;
    }
    let global = check(&mut con, &["api", "user", "u"]).await;
    assert_eq!(
        global[..2],
        pairs(&[("overall_code", "OK"), ("code", "OVER_LIMIT")])
    );
    assert!(
        global.contains(&("shadow_denied".into(), "1".into())),
        "{global:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn hits_are_charged_and_hits_above_capacity_are_never_allowed() {
    let server = server(false).await;
    let mut con = server.client(false).await;
    let seven = check(&mut con, &["api", "upload", "u", "hits", "7"]).await;
    assert!(
        seven.contains(&("remaining".into(), "3".into())),
        "{seven:?}"
    );
    let never = check(&mut con, &["api", "upload", "u", "HITS", "11"]).await;
    assert_eq!(
        never[..2],
        pairs(&[("overall_code", "OVER_LIMIT"), ("code", "OVER_LIMIT")])
    );
    assert!(
        never.contains(&("never_allowed".into(), "1".into())),
        "{never:?}"
    );
    assert!(
        !never.iter().any(|(k, _)| k == "retry_after_ms"),
        "{never:?}"
    );
    // Nothing was charged by the refused 11; HITS 0 counts as 1, as in /v1/check.
    let after = check(&mut con, &["api", "upload", "u", "HITS", "0"]).await;
    assert!(
        after.contains(&("remaining".into(), "2".into())),
        "{after:?}"
    );
    server.stop().await;
}

#[tokio::test]
async fn reloaded_rules_are_in_force_for_the_next_command() {
    let dir = std::env::temp_dir().join(format!("weir-resp-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rules.yaml");
    std::fs::write(&file, RULES).unwrap();
    let mut engine = EngineSettings::default();
    engine.rules = RuleSource::Path(file.clone());
    let (server, engine) = start_engine(engine, Settings::default()).await;
    let mut con = server.client(false).await;
    assert_eq!(
        check(&mut con, &["api", "user", "x"]).await[2],
        ("rule".into(), "api.user".into())
    );
    std::fs::write(
        &file,
        "domain: api\ndescriptors:\n  - key: other\n    rule: {unlimited: true}\n",
    )
    .unwrap();
    engine.reload().await;
    assert_eq!(
        check(&mut con, &["api", "user", "x"]).await[2],
        ("rule".into(), "nil".into())
    );
    assert_eq!(
        check(&mut con, &["api", "other", "x"]).await[2],
        ("rule".into(), "api.other".into())
    );
    server.stop().await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn malformed_requests_are_errors_that_say_why() {
    let server = server(false).await;
    let mut raw = server.raw().await;
    assert_eq!(
        raw.call(&["WEIR.CHECK", "api", "user"]).await,
        "-ERR wrong number of arguments for 'weir.check' command"
    );
    assert_eq!(
        raw.call(&["WEIR.CHECK", "api", "user", "a", "extra"]).await,
        "-ERR wrong number of arguments for 'weir.check' command: entries come in key value pairs"
    );
    assert_eq!(
        raw.call(&["WEIR.CHECK", "api", "user", "a", "HITS", "-1"])
            .await,
        "-ERR HITS must be a non-negative integer, not '-1'"
    );
    assert_eq!(
        raw.call(&["WEIR.CHECK", "", "user", "a"]).await,
        "-ERR rate limit domain must not be empty"
    );
    server.stop().await;
}
