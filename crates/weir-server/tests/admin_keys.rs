//! The admin API's peek, penalty and reward, the list of blocked keys, and the top denied
//! keys with shadow / roll-out denials kept apart (issue 29): a real server on loopback
//! sockets under a manual clock, asked over HTTP as an operator would.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, check_body, settings, Scratch, TestServer};
use serde_json::{json, Value};
use weir_engine::{StoreClock, StoreSpec};
use weir_server::AdminToken;
use weir_testkit::servers::RedisServer;

const TOKEN: &str = "test-admin-token-0123456789";

const RULES: &str = "\
domain: d
descriptors:
  - key: user
    rule: {algorithm: fixed_window, limit: 5, window: 1m}
  - key: login
    rule:
      algorithm: fixed_window
      limit: 1
      window: 1m
      lockout: {duration: 5m}
  - key: shadowed
    rule: {algorithm: fixed_window, limit: 1, window: 1m, shadow: true}
  - key: rollout
    rule: {algorithm: fixed_window, limit: 1, window: 1m, enforce_percent: 0}
  - key: free
    rule: {unlimited: true}
";

async fn server(name: &str) -> (TestServer, weir_core::ManualClock, Scratch) {
    let dir = Scratch::new(name);
    let (mut settings, clock) = settings(Some(&dir.write("rules.yaml", RULES)));
    settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
    (TestServer::start(settings).await, clock, dir)
}

async fn admin(server: &TestServer, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let body = body.map(|b| b.to_string());
    let a = server
        .send(method, path, body.as_deref(), Some(TOKEN))
        .await;
    let v = serde_json::from_str(&a.body).unwrap_or(Value::Null);
    (a.status, v)
}

fn key(name: &str, value: &str) -> Value {
    json!({"domain": "d", "entries": [{"key": name, "value": value}]})
}

fn with(mut body: Value, field: &str, value: u64) -> Value {
    body[field] = json!(value);
    body
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_new_admin_calls_need_the_token() {
    bounded(async {
        let (server, _clock, _dir) = server("admin-keys-token").await;
        let calls = [
            ("POST", "/admin/keys/peek"),
            ("POST", "/admin/keys/penalty"),
            ("POST", "/admin/keys/reward"),
            ("GET", "/admin/keys/blocked"),
        ];
        let body = key("user", "alice").to_string();
        for (method, path) in calls {
            for token in [None, Some("wrong-token-0123456789")] {
                let a = server.send(method, path, Some(&body), token).await;
                assert_eq!(a.status, 401, "{method} {path} with {token:?}");
                assert_eq!(a.header("www-authenticate"), Some("Bearer"));
            }
        }
        // A wrong method is answered only after the token check.
        let a = server.send("GET", "/admin/keys/peek", None, None).await;
        assert_eq!(a.status, 401);
        let (status, _) = admin(&server, "GET", "/admin/keys/peek", None).await;
        assert_eq!(status, 405);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peek_penalty_and_reward_act_through_the_engine() {
    bounded(async {
        let (server, _clock, _dir) = server("admin-keys-verbs").await;
        let alice = key("user", "alice");
        let check = check_body("d", &[("user", "alice")]);
        for _ in 0..2 {
            assert_eq!(server.post("/v1/check", &check).await.status, 200);
        }

        // Peek consumes nothing, however often.
        for _ in 0..3 {
            let (status, v) = admin(&server, "POST", "/admin/keys/peek", Some(alice.clone())).await;
            assert_eq!(status, 200, "{v}");
            assert_eq!(
                (&v["rule"], &v["allowed"], &v["remaining"], &v["limit"]),
                (&json!("d.user"), &json!(true), &json!(3), &json!(5))
            );
        }

        // A penalty of 3 uses the rest: the next check is denied.
        let (status, v) = admin(
            &server,
            "POST",
            "/admin/keys/penalty",
            Some(with(alice.clone(), "units", 3)),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!((&v["penalized"], &v["remaining"]), (&json!(3), &json!(0)));
        let (_, v) = admin(&server, "POST", "/admin/keys/peek", Some(alice.clone())).await;
        assert_eq!(v["allowed"], false, "{v}");
        assert!(v["retry_after_ms"].as_u64().unwrap() > 0, "{v}");
        assert_eq!(server.post("/v1/check", &check).await.status, 429);

        // A reward of 2 gives room back: two more pass, the third does not.
        let (status, v) = admin(
            &server,
            "POST",
            "/admin/keys/reward",
            Some(with(alice.clone(), "units", 2)),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!((&v["rewarded"], &v["remaining"]), (&json!(2), &json!(2)));
        assert_eq!(server.post("/v1/check", &check).await.status, 200);
        assert_eq!(server.post("/v1/check", &check).await.status, 200);
        assert_eq!(server.post("/v1/check", &check).await.status, 429);

        // Units default to 1.
        let (_, v) = admin(&server, "POST", "/admin/keys/reward", Some(alice.clone())).await;
        assert_eq!((&v["rewarded"], &v["remaining"]), (&json!(1), &json!(1)));

        // Bad input gets a clear error, never a silent no-op.
        let (status, v) = admin(
            &server,
            "POST",
            "/admin/keys/penalty",
            Some(with(alice.clone(), "units", 0)),
        )
        .await;
        assert_eq!(
            (status, &v["error"]),
            (400, &json!("units: a positive number of units is required"))
        );
        let (status, v) = admin(
            &server,
            "POST",
            "/admin/keys/peek",
            Some(with(alice.clone(), "units", 1)),
        )
        .await;
        assert_eq!(
            (status, &v["error"]),
            (
                400,
                &json!("peek takes only domain and entries: it changes nothing")
            )
        );
        let (status, _) = admin(
            &server,
            "POST",
            "/admin/keys/peek",
            Some(key("nothing", "x")),
        )
        .await;
        assert_eq!(status, 404);
        let (status, v) = admin(
            &server,
            "POST",
            "/admin/keys/penalty",
            Some(key("free", "x")),
        )
        .await;
        assert_eq!(
            (status, &v["error"]),
            (409, &json!("rule d.free is unlimited: nothing is counted"))
        );
        let (status, _) = admin(
            &server,
            "POST",
            "/admin/keys/reward",
            Some(json!({"domain": "d"})),
        )
        .await;
        assert_eq!(status, 400);
        server.stop().await.unwrap();
    })
    .await;
}

/// A reward gives usage back; it must not lift a block or a lockout (only unblock and
/// reset do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn neither_reward_nor_penalty_lifts_a_lockout() {
    bounded(async {
        let (server, _clock, _dir) = server("admin-keys-lockout").await;
        let check = check_body("d", &[("login", "mallory")]);
        assert_eq!(server.post("/v1/check", &check).await.status, 200);
        assert_eq!(
            server.post("/v1/check", &check).await.status,
            429,
            "locked out"
        );
        let mallory = key("login", "mallory");
        let (status, v) = admin(
            &server,
            "POST",
            "/admin/keys/reward",
            Some(with(mallory.clone(), "units", 1000)),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["allowed"], false, "still locked out: {v}");
        assert_eq!(server.post("/v1/check", &check).await.status, 429);
        let (_, v) = admin(&server, "POST", "/admin/keys/inspect", Some(mallory)).await;
        assert_eq!(v["blocked_for_ms"], 300_000, "{v}");
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_lists_blocked_and_locked_out_keys_bounded() {
    bounded(async {
        let (server, clock, _dir) = server("admin-keys-blocked").await;
        let (status, v) = admin(&server, "GET", "/admin/keys/blocked", None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!((&v["total"], &v["keys"]), (&json!(0), &json!([])));

        for (user, ms) in [("a", 60_000u64), ("b", 120_000), ("c", 30_000)] {
            let (status, _) = admin(
                &server,
                "POST",
                "/admin/keys/block",
                Some(with(key("user", user), "duration_ms", ms)),
            )
            .await;
            assert_eq!(status, 200);
        }
        // A lockout, engaged by traffic.
        let check = check_body("d", &[("login", "mallory")]);
        server.post("/v1/check", &check).await;
        assert_eq!(server.post("/v1/check", &check).await.status, 429);
        // A key used but not blocked is not listed.
        server
            .post("/v1/check", &check_body("d", &[("user", "bob")]))
            .await;

        let (status, v) = admin(&server, "GET", "/admin/keys/blocked?limit=2", None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            (&v["total"], &v["listed"], &v["store"]),
            (&json!(4), &json!(2), &json!("memory"))
        );
        let keys = v["keys"].as_array().unwrap();
        assert!(keys[0]["key"].as_str().unwrap().ends_with("mallory"), "{v}");
        assert_eq!(
            (
                &keys[0]["rule"],
                &keys[0]["blocked_for_ms"],
                &keys[0]["strikes"]
            ),
            (&json!("d.login"), &json!(300_000), &json!(1))
        );
        assert!(keys[1]["key"].as_str().unwrap().ends_with('b'), "{v}");
        assert_eq!(
            (&keys[1]["rule"], &keys[1]["blocked_for_ms"]),
            (&json!("d.user"), &json!(120_000))
        );

        // Time passes: ended blocks are gone; an unblocked key is gone.
        clock.advance(Duration::from_secs(61));
        let (_, v) = admin(
            &server,
            "POST",
            "/admin/keys/unblock",
            Some(key("login", "mallory")),
        )
        .await;
        assert_eq!(v["unblocked"], true);
        let (_, v) = admin(&server, "GET", "/admin/keys/blocked", None).await;
        assert_eq!(v["total"], 1, "{v}");
        assert_eq!(v["keys"][0]["blocked_for_ms"], 59_000);

        // The bound is stated, and a bad query is refused.
        let (status, v) = admin(&server, "GET", "/admin/keys/blocked?limit=1001", None).await;
        assert_eq!(
            (status, &v["error"]),
            (
                400,
                &json!("limit: at most 1000 keys are listed in one call")
            )
        );
        let (status, _) = admin(&server, "GET", "/admin/keys/blocked?limit=-1", None).await;
        assert_eq!(status, 400);
        let (status, _) = admin(&server, "GET", "/admin/keys/blocked?max=3", None).await;
        assert_eq!(status, 400);
        server.stop().await.unwrap();
    })
    .await;
}

/// On a network store the list would be one instance's guess or a scan of the shared
/// server: the call is refused, saying why and what to use instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_on_a_network_store_is_refused_clearly() {
    bounded(async {
        let mut redis = RedisServer::start();
        let dir = Scratch::new("admin-keys-redis");
        let (mut settings, _clock) = settings(Some(&dir.write("rules.yaml", RULES)));
        settings.engine.store = StoreSpec::parse(&redis.url()).unwrap();
        settings.engine.store_clock = StoreClock::Process;
        // A loaded test host is slow, not down: the live store's answers must not be
        // taken for an outage (the dead store's refusals come at once).
        settings.engine.failover.timeout = Duration::from_secs(2);
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;
        let (status, v) = admin(&server, "GET", "/admin/keys/blocked", None).await;
        assert_eq!(status, 409, "{v}");
        let error = v["error"].as_str().unwrap();
        assert!(
            error.starts_with("the redis store cannot list its blocked keys"),
            "{error}"
        );
        assert!(error.contains("POST /admin/keys/inspect"), "{error}");
        // The verbs on one key work there.
        let (status, v) = admin(
            &server,
            "POST",
            "/admin/keys/penalty",
            Some(with(key("user", "zoe"), "units", 5)),
        )
        .await;
        assert_eq!((status, &v["remaining"]), (200, &json!(0)), "{v}");
        let (_, v) = admin(
            &server,
            "POST",
            "/admin/keys/peek",
            Some(key("user", "zoe")),
        )
        .await;
        assert_eq!(v["allowed"], false, "{v}");

        // The store dies: a penalty or a reward is not applied to the local fallback (it
        // would answer 200 and be lost when the store returns); the operator is told.
        redis.kill();
        for verb in ["penalty", "reward"] {
            let path = format!("/admin/keys/{verb}");
            let (status, v) = admin(&server, "POST", &path, Some(key("user", "zoe"))).await;
            assert_eq!(status, 503, "{verb}: {v}");
            let error = v["error"].as_str().unwrap();
            assert!(
                error.contains(&format!("{verb} was not applied")),
                "{error}"
            );
        }
        server.stop().await.unwrap();
    })
    .await;
}

/// Issue 29: shadow and roll-out denials were counted and ranked as denials in
/// `/admin/top-denied` and on the dashboard ("1200 denials" beside the page's own 791;
/// shadow keys ranked "most denied").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shadow_and_rollout_denials_are_not_ranked_as_denials() {
    bounded(async {
        let (server, _clock, _dir) = server("admin-keys-shadow").await;
        for (rule, value, times) in [
            ("shadowed", "sam", 6),
            ("rollout", "rob", 4),
            ("user", "eve", 7),
        ] {
            let body = check_body("d", &[(rule, value)]);
            for _ in 0..times {
                server.post("/v1/check", &body).await;
            }
        }
        // eve: 2 enforced denials; sam: 5 shadow denials; rob: 3 outside the roll-out.
        let (status, v) = admin(&server, "GET", "/admin/top-denied", None).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["total_denials"], 2, "{v}");
        let keys = v["keys"].as_array().unwrap();
        assert_eq!(keys.len(), 1, "{v}");
        assert!(keys[0]["key"].as_str().unwrap().ends_with("eve"), "{v}");
        let shadow = &v["shadow_denied"];
        assert_eq!(shadow["total_denials"], 8, "{v}");
        assert_eq!(shadow["keys"][0]["rule"], "d.shadowed");
        assert_eq!(shadow["keys"][0]["count"], 5);
        assert_eq!(shadow["keys"][1]["rule"], "d.rollout");

        // The dashboard's numbers agree with its own chart (enforced apart from shadow).
        let a = server
            .send("GET", "/dashboard/data", None, Some(TOKEN))
            .await;
        let data: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(data["top_denied"]["total_denials"], 2, "{data}");
        assert_eq!(data["top_shadow_denied"]["total_denials"], 8, "{data}");
        let metrics = server.get("/metrics").await.body;
        for line in [
            r#"weir_decisions_total{domain="d",rule="d.user",outcome="denied"} 2"#,
            r#"weir_decisions_total{domain="d",rule="d.shadowed",outcome="shadow_denied"} 5"#,
            r#"weir_decisions_total{domain="d",rule="d.rollout",outcome="shadow_denied"} 3"#,
        ] {
            assert!(metrics.contains(line), "{line} in {metrics}");
        }
        server.stop().await.unwrap();
    })
    .await;
}
