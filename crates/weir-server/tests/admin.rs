//! The admin API: absent without a token (404), refused with a missing or wrong one (401),
//! and with the right one: list rules, inspect / block / unblock / reset a key, reload,
//! and the top denied keys.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, envoy_readme_dir, settings, TestServer};
use serde_json::{json, Value};
use weir_server::AdminToken;

const TOKEN: &str = "test-admin-token-0123456789";

async fn admin_server() -> (TestServer, weir_core::ManualClock) {
    let (mut settings, clock) = settings(Some(&envoy_readme_dir()));
    settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
    (TestServer::start(settings).await, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_configured_there_is_no_admin_api() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        for path in ["/admin/rules", "/admin/config", "/admin/top-denied"] {
            let a = server.send("GET", path, None, Some(TOKEN)).await;
            assert_eq!(a.status, 404, "{path}");
        }
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_call_needs_the_token() {
    bounded(async {
        let (server, _clock) = admin_server().await;
        let calls = [
            ("GET", "/admin/rules"),
            ("GET", "/admin/config"),
            ("POST", "/admin/reload"),
            ("POST", "/admin/keys/reset"),
            ("GET", "/admin/top-denied"),
        ];
        for (method, path) in calls {
            for token in [None, Some("wrong-token-0123456789"), Some("")] {
                let a = server.send(method, path, Some("{}"), token).await;
                assert_eq!(a.status, 401, "{method} {path} with {token:?}");
                assert_eq!(a.header("www-authenticate"), Some("Bearer"));
                assert!(!a.body.contains(TOKEN));
            }
        }
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains("weir_admin_unauthorized_total 15"),
            "{metrics}"
        );
        let ok = server.send("GET", "/admin/config", None, Some(TOKEN)).await;
        assert_eq!(ok.status, 200);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_block_unblock_reset_and_top_denied() {
    bounded(async {
        let (server, _clock) = admin_server().await;
        let admin = |method: &'static str, path: &'static str, body: Option<String>| {
            let server = &server;
            async move {
                let a = server
                    .send(method, path, body.as_deref(), Some(TOKEN))
                    .await;
                (
                    a.status,
                    serde_json::from_str::<Value>(&a.body).unwrap_or(Value::Null),
                )
            }
        };
        let key = json!({"domain": "internal", "entries": [{"key": "azure", "value": "tenant-1"}]});
        let check = check_body("internal", &[("azure", "tenant-1")]);
        for _ in 0..3 {
            assert_eq!(server.post("/v1/check", &check).await.status, 200);
        }
        let (status, v) = admin("POST", "/admin/keys/inspect", Some(key.to_string())).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            (v["rule"].clone(), v["used"].clone(), v["remaining"].clone()),
            (json!("internal.azure"), json!(3), json!(97))
        );

        let mut block = key.clone();
        block["duration_ms"] = json!(60_000);
        let (status, _) = admin("POST", "/admin/keys/block", Some(block.to_string())).await;
        assert_eq!(status, 200);
        assert_eq!(
            server.post("/v1/check", &check).await.status,
            429,
            "blocked"
        );
        let (_, v) = admin("POST", "/admin/keys/inspect", Some(key.to_string())).await;
        assert_eq!(v["blocked_for_ms"], 60_000);

        let (status, _) = admin("POST", "/admin/keys/unblock", Some(key.to_string())).await;
        assert_eq!(status, 200);
        assert_eq!(
            server.post("/v1/check", &check).await.status,
            200,
            "unblocked"
        );

        let (status, _) = admin("POST", "/admin/keys/reset", Some(key.to_string())).await;
        assert_eq!(status, 200);
        let (_, v) = admin("POST", "/admin/keys/inspect", Some(key.to_string())).await;
        assert_eq!(v["used"], 0, "reset");

        // Errors name what was wrong.
        let (status, v) = admin("POST", "/admin/keys/block", Some(key.to_string())).await;
        assert_eq!(
            (status, v["error"].clone()),
            (
                400,
                json!("duration_ms: a positive number of milliseconds is required")
            )
        );
        let nothing = json!({"domain": "internal", "entries": [{"key": "none", "value": "x"}]});
        let (status, _) = admin("POST", "/admin/keys/inspect", Some(nothing.to_string())).await;
        assert_eq!(status, 404);
        let ldap = json!({"domain": "internal", "entries": [{"key": "ldap", "value": "x"}]});
        let (status, v) = admin("POST", "/admin/keys/reset", Some(ldap.to_string())).await;
        assert_eq!(
            (status, v["error"].clone()),
            (
                409,
                json!("rule internal.ldap is unlimited: nothing is counted")
            )
        );

        // Top denied keys: the black-listed IP leads.
        let blocked = check_body("edge_proxy_per_ip", &[("remote_address", "50.0.0.5")]);
        for _ in 0..5 {
            assert_eq!(server.post("/v1/check", &blocked).await.status, 429);
        }
        let (status, v) = admin("GET", "/admin/top-denied?limit=1", None).await;
        assert_eq!(status, 200);
        assert_eq!(v["keys"].as_array().unwrap().len(), 1);
        assert_eq!(
            v["keys"][0]["rule"],
            "edge_proxy_per_ip.remote_address_50.0.0.5"
        );
        assert_eq!(v["keys"][0]["count"], 5);
        assert_eq!(v["total_denials"], 6);

        // Rules and config status.
        let (_, v) = admin("GET", "/admin/rules", None).await;
        let rules = v["rules"].as_array().unwrap();
        let azure = rules.iter().find(|r| r["id"] == "internal.azure").unwrap();
        assert_eq!(azure["algorithm"], "fixed_window");
        assert_eq!(azure["window_ms"], 60_000);
        assert_eq!(v["config"]["generation"], 1);
        assert_eq!(v["config"]["last_ok"], true);
        server.stop().await.unwrap();
    })
    .await;
}

/// Issue 26: a block of 2^64 − 1 ms was answered `blocked_for_ms: 18446744073709551615`
/// while the store clamped it silently. A block above the documented maximum (365 days) is
/// refused and applies nothing; the maximum itself is applied and echoed as applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_above_the_maximum_is_refused_and_the_applied_duration_echoed() {
    bounded(async {
        let (server, _clock) = admin_server().await;
        let check = check_body("internal", &[("azure", "tenant-9")]);
        let block = |ms: u64| {
            json!({"domain": "internal", "entries": [{"key": "azure", "value": "tenant-9"}], "duration_ms": ms})
                .to_string()
        };
        let max: u64 = 365 * 24 * 3600 * 1000;
        for ms in [u64::MAX, max + 1] {
            let a = server
                .send("POST", "/admin/keys/block", Some(&block(ms)), Some(TOKEN))
                .await;
            assert_eq!(a.status, 400, "{}", a.body);
            let v: Value = serde_json::from_str(&a.body).unwrap();
            assert_eq!(
                v["error"],
                format!("duration_ms: {ms} is above the maximum of {max} (365 days); nothing was blocked")
            );
            assert_eq!(server.post("/v1/check", &check).await.status, 200, "not blocked");
        }
        let a = server
            .send("POST", "/admin/keys/block", Some(&block(max)), Some(TOKEN))
            .await;
        assert_eq!(a.status, 200, "{}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["blocked_for_ms"], max);
        let key = json!({"domain": "internal", "entries": [{"key": "azure", "value": "tenant-9"}]});
        let inspect = server
            .send("POST", "/admin/keys/inspect", Some(&key.to_string()), Some(TOKEN))
            .await;
        let v: Value = serde_json::from_str(&inspect.body).unwrap();
        assert_eq!(v["blocked_for_ms"], max, "what the store holds is what was echoed");
        assert_eq!(server.post("/v1/check", &check).await.status, 429);
        server.stop().await.unwrap();
    })
    .await;
}
