//! The `axum_app` example's router, driven with `oneshot`: the per-user limit, and the login
//! lockout flow (after three failures the account is locked, and the right password does not
//! unlock it; a success before that clears the count); and on a real socket under a manual
//! clock, the locked answer's `Retry-After`, rounded up.

#![cfg(feature = "axum")] // reads the peer address the way axum records it
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

#[path = "../examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;
mod common;

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use tower::ServiceExt;
use weir_core::Limiter;

fn request(method: &str, path: &str, user: Option<&str>, body: &str) -> Request<Body> {
    let mut r = Request::builder().method(method).uri(path);
    if let Some(user) = user {
        r = r.header("x-user", user);
    }
    let mut r = r.body(Body::from(body.to_string())).unwrap();
    let peer: SocketAddr = "192.0.2.10:5555".parse().unwrap();
    r.extensions_mut().insert(axum::extract::ConnectInfo(peer));
    r
}

async fn call(app: &axum::Router, req: Request<Body>) -> (StatusCode, String) {
    let r = app.clone().oneshot(req).await.unwrap();
    let status = r.status();
    let body = r.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn the_api_limits_each_user() {
    let app = axum_app::app(Limiter::default()).unwrap();
    let mut codes = Vec::new();
    for _ in 0..7 {
        codes.push(
            call(&app, request("GET", "/api/search", Some("ann"), ""))
                .await
                .0
                .as_u16(),
        );
    }
    assert_eq!(codes, [200, 200, 200, 200, 200, 429, 429]);
    let other = call(&app, request("GET", "/api/search", Some("bea"), "")).await;
    assert_eq!(
        other.0,
        StatusCode::OK,
        "another user has a budget of her own"
    );
}

#[tokio::test]
async fn three_failed_logins_lock_the_account_and_success_clears_the_count() {
    let app = axum_app::app(Limiter::default()).unwrap();
    let login = |user: &str, password: &str| {
        request(
            "POST",
            "/login",
            None,
            &format!(r#"{{"user": "{user}", "password": "{password}"}}"#),
        )
    };
    // Two failures, then the right password: the count starts again.
    for _ in 0..2 {
        assert_eq!(
            call(&app, login("carl", "nope")).await.0,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(call(&app, login("carl", "hunter2")).await.0, StatusCode::OK);
    let (status, body) = call(&app, login("carl", "nope")).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body.contains(r#""attempts_left":2"#), "{body}");

    // Three failures in a row use up the account's attempts: the fourth is refused and locks
    // it, and even the right password waits.
    let mut codes = Vec::new();
    for _ in 0..4 {
        codes.push(call(&app, login("dana", "nope")).await.0.as_u16());
    }
    assert_eq!(codes, [401, 401, 401, 429]);
    let (status, body) = call(&app, login("dana", "hunter2")).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert!(body.contains("account locked"), "{body}");
}

/// issue 13: the example rounded the lockout's 29.99 s down to `Retry-After: 29`; a client
/// that waited that long was refused again. The headers come from one call now
/// (`headers_for`), rounded up.
#[tokio::test]
async fn a_locked_account_is_told_to_wait_rounded_up_not_down() {
    let (limiter, clock) = common::manual_limiter();
    let addr = common::serve(axum_app::app(limiter).unwrap(), true).await;
    let login = || {
        common::send(
            addr,
            "POST",
            "/login",
            &[],
            r#"{"user": "erin", "password": "nope"}"#,
        )
    };
    for _ in 0..3 {
        assert_eq!(login().await.status(), StatusCode::UNAUTHORIZED);
    }
    let locked = login().await;
    assert_eq!(locked.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(common::header(&locked, "retry-after"), "30");

    // 10 ms later, 29.99 s are left: still 30 (from the inspected lockout this time).
    clock.advance(Duration::from_millis(10));
    let locked = login().await;
    assert_eq!(locked.status(), StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(common::header(&locked, "retry-after"), "30");
    assert_eq!(
        common::header(&locked, "ratelimit"),
        r#""failed_logins";r=0;t=30"#
    );
    assert_eq!(
        common::header(&locked, "ratelimit-policy"),
        r#""failed_logins";q=3;w=60"#
    );
    let body: serde_json::Value = serde_json::from_str(locked.body()).unwrap();
    assert_eq!(body["retry_after_s"], 30);
}
