//! Issue 26: the admin API and the dashboard could only live on the public decision port.
//! With an admin listener of their own (`Listeners::with_admin`, `weir serve
//! --admin-listen`), they are served there and only there, the admin token still required;
//! the decision port keeps decisions, health and metrics. Without one, nothing changes
//! (`admin.rs`, `dashboard.rs`). Real loopback sockets, a manual clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};
use tokio::net::TcpListener;
use weir_server::{AdminToken, HttpAnswer, Listeners, ServerError};

const TOKEN: &str = "test-admin-token-0123456789";

async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    body: Option<&str>,
    token: Option<&str>,
) -> HttpAnswer {
    weir_server::client::send(
        &addr.to_string(),
        method,
        path,
        body,
        token,
        Duration::from_secs(10),
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_api_and_dashboard_move_to_their_own_listener() {
    bounded(async {
        let dir = Scratch::new("admin-listener");
        let rules = dir.write("rules.yaml", &simple_rules("d", "user", 5, "hour"));
        let (mut settings, _clock) = settings(Some(&rules));
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let admin_listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = admin_listener.local_addr().unwrap();
        let server = TestServer::start_with_admin(settings, admin_listener).await;
        let public = server.http;

        // The decision port: decisions, health and metrics; no admin API, no dashboard,
        // not even with the token.
        for (method, path) in [
            ("GET", "/admin/config"),
            ("POST", "/admin/reload"),
            ("POST", "/admin/keys/block"),
            ("GET", "/dashboard"),
            ("GET", "/dashboard/data"),
        ] {
            let a = send(public, method, path, Some("{}"), Some(TOKEN)).await;
            assert_eq!(a.status, 404, "{method} {path} on the decision port: {}", a.body);
        }
        let alice = check_body("d", &[("user", "alice")]);
        assert_eq!(server.post("/v1/check", &alice).await.status, 200);
        for path in ["/healthz", "/readyz", "/metrics"] {
            assert_eq!(server.get(path).await.status, 200, "{path}");
        }

        // The admin listener: the admin API and the dashboard, behind the token; no
        // decision endpoint.
        assert_eq!(send(admin, "GET", "/admin/config", None, None).await.status, 401);
        assert_eq!(
            send(admin, "GET", "/admin/config", None, Some("wrong-token-0123456789")).await.status,
            401
        );
        assert_eq!(send(admin, "GET", "/admin/config", None, Some(TOKEN)).await.status, 200);
        assert_eq!(send(admin, "GET", "/dashboard", None, None).await.status, 200);
        assert_eq!(send(admin, "GET", "/dashboard/data", None, None).await.status, 401);
        assert_eq!(send(admin, "GET", "/dashboard/data", None, Some(TOKEN)).await.status, 200);
        assert_eq!(send(admin, "GET", "/healthz", None, None).await.status, 200);
        for path in ["/v1/check", "/json", "/v1/acquire"] {
            let a = send(admin, "POST", path, Some(&alice), Some(TOKEN)).await;
            assert_eq!(a.status, 404, "{path} on the admin listener");
        }

        // One engine behind both: a block through the admin listener denies on the
        // decision port.
        let block = r#"{"domain": "d", "entries": [{"key": "user", "value": "alice"}], "duration_ms": 60000}"#;
        let a = send(admin, "POST", "/admin/keys/block", Some(block), Some(TOKEN)).await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(server.post("/v1/check", &alice).await.status, 429);
        server.stop().await.unwrap();
    })
    .await;
}

/// An admin listener without a token would serve nothing: refused at start, saying why.
#[tokio::test]
async fn an_admin_listener_without_a_token_is_refused() {
    bounded(async {
        let (settings, _clock) = settings(None);
        let app = weir_server::App::new(settings).await.unwrap();
        let bind = || TcpListener::bind("127.0.0.1:0");
        let listeners = Listeners::new(bind().await.unwrap(), bind().await.unwrap())
            .with_admin(bind().await.unwrap());
        let error = weir_server::serve_on(app, listeners, std::future::pending())
            .await
            .unwrap_err();
        assert!(matches!(error, ServerError::AdminWithoutToken), "{error}");
        assert_eq!(
            error.to_string(),
            "an admin listener needs an admin token (without one there is no admin API)"
        );
    })
    .await;
}
