//! A store that fails mid-test reaches the RESP commands through the engine's judgement,
//! as it reaches `POST /v1/check`: a real `redis-server` (a throwaway process from
//! `weir-testkit`) behind `weir serve`'s store stack (the failover guard), killed while
//! the front end serves. A `fail_closed` rule then denies `WEIR.CHECK` and says why
//! (`reason store_unavailable`, counted as `outcome="failed_closed"`); a `local_fallback`
//! rule (the rule file's, and `CL.THROTTLE` / `THROTTLE`'s own, whose default it is) keeps
//! deciding in-process, its limit still enforced; and `Engine::check_rule` marks a
//! fail-closed denial as `decide` does. Time is the manual clock's; nothing sleeps.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{ints, start_engine, PATIENCE};
use redis::Value;
use weir_core::{FailurePolicy, Key, Rule};
use weir_engine::{EngineSettings, RuleSource, StoreClock, StoreSpec};
use weir_testkit::servers::RedisServer;

const RULES: &str = "domain: d
descriptors:
  - key: login
    rule: {algorithm: fixed_window, limit: 1, window: 1h, on_failure: fail_closed}
  - key: api
    rule: {algorithm: fixed_window, limit: 2, window: 1h, on_failure: local_fallback}
";

fn text(v: &Value) -> String {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        Value::SimpleString(s) => s.clone(),
        Value::Int(n) => n.to_string(),
        Value::Nil => "nil".into(),
        other => panic!("unexpected {other:?}"),
    }
}

/// `WEIR.CHECK d key value`'s reply as (name, value) pairs (RESP2's flat array).
async fn check(
    con: &mut redis::aio::MultiplexedConnection,
    key: &str,
    value: &str,
) -> Vec<(String, String)> {
    let reply: Value = redis::cmd("WEIR.CHECK")
        .arg("d")
        .arg(key)
        .arg(value)
        .query_async(con)
        .await
        .unwrap();
    match reply {
        Value::Array(items) => items
            .chunks(2)
            .map(|p| (text(&p[0]), text(&p[1])))
            .collect(),
        other => panic!("not a flat map: {other:?}"),
    }
}

fn field<'a>(fields: &'a [(String, String)], name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

/// `weir_decisions_total{domain, rule, outcome}` in `metrics` (0 when absent).
fn decisions(metrics: &str, domain: &str, rule: &str, outcome: &str) -> u64 {
    let needle =
        format!(r#"weir_decisions_total{{domain="{domain}",rule="{rule}",outcome="{outcome}"}} "#);
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(needle.as_str()))
        .map_or(0, |n| n.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_store_is_judged_by_the_engine_on_every_command() {
    let mut redis = RedisServer::start();
    let mut engine = EngineSettings::default();
    engine.rules = RuleSource::Inline {
        name: "store_down.yaml",
        yaml: RULES,
    };
    engine.store = StoreSpec::parse(&redis.url()).unwrap();
    engine.store_clock = StoreClock::Process;
    // A debug build's first calls (loading Weir's functions) may take longer than the
    // default under a busy machine: they would meet the failure policy before the outage.
    engine.failover.timeout = Duration::from_secs(10);
    let (server, engine) = start_engine(engine, weir_resp::Settings::default()).await;
    let mut con = server.client(false).await;
    let done = async {
        // The store answers: a real limit, no reason.
        let first = check(&mut con, "login", "alice").await;
        assert_eq!(field(&first, "code"), Some("OK"), "{first:?}");
        let limited = check(&mut con, "login", "alice").await;
        assert_eq!(field(&limited, "code"), Some("OVER_LIMIT"), "{limited:?}");
        assert_eq!(field(&limited, "reason"), None, "a real limit: {limited:?}");
        let got = ints(&mut con, &["CL.THROTTLE", "cell", "1", "1", "60", "1"]).await;
        assert_eq!(got[0], 0, "allowed while the store answers: {got:?}");

        redis.kill();

        // fail_closed: every check denied, each saying why.
        for attempt in 0..4 {
            let bob = check(&mut con, "login", "bob").await;
            assert_eq!(
                field(&bob, "code"),
                Some("OVER_LIMIT"),
                "attempt {attempt}: {bob:?}"
            );
            assert_eq!(
                field(&bob, "reason"),
                Some("store_unavailable"),
                "attempt {attempt}"
            );
        }
        // local_fallback: decided in-process, the limit (2) still enforced, no reason.
        for expected in ["OK", "OK", "OVER_LIMIT"] {
            let carol = check(&mut con, "api", "carol").await;
            assert_eq!(field(&carol, "code"), Some(expected), "{carol:?}");
            assert_eq!(field(&carol, "reason"), None, "{carol:?}");
        }
        // CL.THROTTLE and THROTTLE (their rules fall back locally): burst 1 is two calls,
        // then limited, on a key the store never saw.
        for expected in [0, 0, 1] {
            let got = ints(&mut con, &["CL.THROTTLE", "cell2", "1", "1", "60", "1"]).await;
            assert_eq!(got[0], expected, "CL.THROTTLE during the outage: {got:?}");
        }
        for expected in [1, 0] {
            let got = ints(&mut con, &["THROTTLE", "crab", "1", "1", "60"]).await;
            assert_eq!(got[0], expected, "THROTTLE during the outage: {got:?}");
        }

        // A caller's own rule that fails closed: denied and marked, as decide marks it.
        let rule = Rule::gcra(1, Duration::from_secs(1), 5)
            .unwrap()
            .on_failure(FailurePolicy::FailClosed)
            .named("cl.throttle");
        let checked = engine
            .check_rule(&Key::new("=dave").unwrap(), &rule, 1, "cl.throttle")
            .await
            .unwrap();
        assert!(
            !checked.decision.allowed && checked.failed_closed,
            "{checked:?}"
        );

        let metrics = engine.render_metrics();
        assert_eq!(
            decisions(&metrics, "d", "d.login", "denied"),
            1,
            "the one real limit"
        );
        assert_eq!(
            decisions(&metrics, "d", "d.login", "failed_closed"),
            4,
            "{metrics}"
        );
        assert_eq!(
            decisions(&metrics, "resp", "cl.throttle", "failed_closed"),
            1,
            "{metrics}"
        );
        assert!(
            decisions(&metrics, "resp", "cl.throttle", "denied") >= 1,
            "{metrics}"
        );
        assert!(
            decisions(&metrics, "resp", "throttle", "denied") >= 1,
            "{metrics}"
        );
    };
    tokio::time::timeout(PATIENCE * 3, done).await.unwrap();
    server.stop().await;
}
