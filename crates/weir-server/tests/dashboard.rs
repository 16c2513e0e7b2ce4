//! The live dashboard over real sockets, under a `ManualClock`: absent without an admin
//! token (404), its data refused with a missing or wrong token (401) while the page itself
//! (a static shell holding no data) is served with a strict policy, and with the token a
//! denial is in the data at once: in its rule's per-second history, among the most denied
//! keys, beside the store's mode, the rules' files and the last reload's error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};
use serde_json::Value;
use weir_server::AdminToken;

const TOKEN: &str = "test-admin-token-0123456789";

async fn data(server: &TestServer) -> Value {
    let answer = server
        .send("GET", "/dashboard/data", None, Some(TOKEN))
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert_eq!(answer.header("cache-control"), Some("no-store"));
    serde_json::from_str(&answer.body).unwrap()
}

/// The rule's series in the history (its last `n` seconds of `field`).
fn last(data: &Value, rule: &str, field: &str, n: usize) -> Vec<u64> {
    let series = data["history"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rule"] == rule)
        .unwrap_or_else(|| panic!("no series for {rule}: {data}"));
    let values: Vec<u64> = series[field]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    values[values.len() - n..].to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_token_configured_there_is_no_dashboard() {
    bounded(async {
        let (settings, _clock) = settings(None);
        let server = TestServer::start(settings).await;
        for path in ["/dashboard", "/dashboard/data", "/dashboard/dashboard.js"] {
            let answer = server.send("GET", path, None, Some(TOKEN)).await;
            assert_eq!(answer.status, 404, "{path}");
        }
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_is_a_shell_and_its_data_needs_the_token() {
    bounded(async {
        let dir = Scratch::new("dashboard-auth");
        let rules = dir.write("rules.yaml", &simple_rules("d", "user", 1, "hour"));
        let (mut settings, _clock) = settings(Some(&rules));
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;

        for token in [None, Some("wrong-token-0123456789"), Some("")] {
            let answer = server.send("GET", "/dashboard/data", None, token).await;
            assert_eq!(answer.status, 401, "{token:?}");
            assert_eq!(answer.header("www-authenticate"), Some("Bearer"));
            assert!(!answer.body.contains("d.user"), "{}", answer.body);
        }
        let metrics = server.get("/metrics").await.body;
        assert!(
            metrics.contains("weir_admin_unauthorized_total 3"),
            "{metrics}"
        );
        // Timed as admin requests, like the admin API's.
        assert!(
            metrics.contains(r#"weir_request_duration_seconds_count{api="admin"} 3"#),
            "{metrics}"
        );

        // The page, its script and style need no token: they hold no data.
        let page = server.get("/dashboard").await;
        assert_eq!(page.status, 200);
        assert_eq!(
            page.header("content-type"),
            Some("text/html; charset=utf-8")
        );
        assert_eq!(page.header("cache-control"), Some("no-store"));
        assert_eq!(page.header("x-frame-options"), Some("DENY"));
        let csp = page.header("content-security-policy").unwrap();
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert!(page.body.contains("/dashboard/dashboard.js"));
        assert!(!page.body.contains("d.user") && !page.body.contains("<script>"));
        let script = server.get("/dashboard/dashboard.js").await;
        assert_eq!(script.status, 200);
        assert!(script.body.contains("sessionStorage"));
        assert!(
            !script.body.contains("innerHTML"),
            "data is written as text"
        );
        assert_eq!(server.get("/dashboard/dashboard.css").await.status, 200);
        // A form posted without the script is no way in either.
        let posted = server
            .send("POST", "/dashboard", Some("token=x"), None)
            .await;
        assert_eq!(posted.status, 405);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_is_in_the_data_at_once() {
    bounded(async {
        let dir = Scratch::new("dashboard-data");
        let rules = dir.write("rules.yaml", &simple_rules("d", "user", 1, "hour"));
        let (mut settings, clock) = settings(Some(&rules));
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;

        let before = data(&server).await;
        assert_eq!(before["history"]["series"], serde_json::json!([]));
        assert_eq!(before["rules"][0]["id"], "d.user");
        assert_eq!(
            before["rules"][0]["file"],
            rules.display().to_string(),
            "each rule's file"
        );
        assert_eq!(before["config"]["source"], rules.display().to_string());
        assert_eq!(before["store"]["store"], "memory");
        assert_eq!(before["store"]["mode"], "store");
        assert_eq!(before["top_denied"]["total_denials"], 0);
        // A front end's own panels are weir proxy's: none under weir serve.
        assert_eq!(before["panels"], serde_json::json!({}));

        let alice = check_body("d", &[("user", "alice")]);
        assert_eq!(server.post("/v1/check", &alice).await.status, 200);
        assert_eq!(server.post("/v1/check", &alice).await.status, 429);
        let now = data(&server).await;
        assert_eq!(last(&now, "d.user", "allowed", 1), [1]);
        assert_eq!(last(&now, "d.user", "denied", 1), [1]);
        let top = &now["top_denied"]["keys"][0];
        assert!(top["key"].as_str().unwrap().contains("alice"), "{now}");
        assert_eq!(top["rule"], "d.user");
        assert_eq!(top["count"], 1);
        let seconds = now["history"]["seconds"].as_u64().unwrap();
        assert_eq!(seconds, 300);

        // A second later, the denial moves back one point and a new one lands in the last.
        clock.advance(Duration::from_secs(1));
        let _ = data(&server).await;
        assert_eq!(server.post("/v1/check", &alice).await.status, 429);
        assert_eq!(server.post("/v1/check", &alice).await.status, 429);
        let later = data(&server).await;
        assert_eq!(last(&later, "d.user", "denied", 3), [0, 1, 2]);
        assert_eq!(
            later["history"]["end_unix_s"].as_u64().unwrap(),
            now["history"]["end_unix_s"].as_u64().unwrap() + 1
        );
        assert_eq!(later["top_denied"]["keys"][0]["count"], 3);

        // A bad file keeps the rules in force: the last reload's error is shown.
        dir.write("rules.yaml", "domain: d\ndescriptors: [");
        let reload = server
            .send("POST", "/admin/reload", None, Some(TOKEN))
            .await;
        assert_eq!(reload.status, 422);
        let failed = data(&server).await;
        assert_eq!(failed["config"]["last_ok"], false);
        assert!(failed["config"]["last_error"]
            .as_str()
            .unwrap()
            .contains("rules.yaml"));
        assert_eq!(failed["rules"][0]["id"], "d.user", "the old rules stay");
        server.stop().await.unwrap();
    })
    .await;
}

/// Issue 26: a key holding U+202E (RIGHT-TO-LEFT OVERRIDE) reversed its own display and what
/// followed it on the page. The data carries keys with control and bidirectional characters
/// escaped (`\u{202e}`), so the page (which writes text, never markup) shows them as such.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_with_control_and_bidi_characters_are_shown_escaped() {
    bounded(async {
        let dir = Scratch::new("dashboard-bidi");
        let rules = dir.write("rules.yaml", &simple_rules("d", "user", 1, "hour"));
        let (mut settings, _clock) = settings(Some(&rules));
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;
        let sneaky = check_body("d", &[("user", "\u{202e}nimda\u{200f}\n\u{1b}[2J")]);
        assert_eq!(server.post("/v1/check", &sneaky).await.status, 200);
        assert_eq!(server.post("/v1/check", &sneaky).await.status, 429);
        let now = data(&server).await;
        let key = now["top_denied"]["keys"][0]["key"].as_str().unwrap();
        assert!(
            key.ends_with("\\u{202e}nimda\\u{200f}\\u{a}\\u{1b}[2J"),
            "{key:?}"
        );
        assert!(
            !key.chars()
                .any(|c| c.is_control() || ('\u{200b}'..='\u{206f}').contains(&c)),
            "{key:?}"
        );
        server.stop().await.unwrap();
    })
    .await;
}
