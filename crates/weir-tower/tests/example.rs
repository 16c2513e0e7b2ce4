//! The `axum_app` example's router, driven with `oneshot`: the per-user limit, and the login
//! lockout flow (after three failures the account is locked, and the right password does not
//! unlock it; a success before that clears the count).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

#[path = "../examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;

use std::net::SocketAddr;

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
