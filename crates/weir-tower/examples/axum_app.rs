//! An axum app protected by Weir's layer: per-IP and per-user limits, and the login
//! lockout flow (count failed logins per account, lock the account out, clear on success).
//!
//! Run it, then try it from another terminal:
//!
//! ```sh
//! cargo run -p weir-tower --example axum_app
//!
//! curl -i localhost:3000/                      # RateLimit-Policy / RateLimit headers
//! for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null -w '%{http_code} ' \
//!   -H 'x-user: ann' localhost:3000/api/search; done   # 200 ×5, then 429: 5/s per user
//! for i in 1 2 3 4; do curl -s -w '\n' localhost:3000/login \
//!   -d '{"user": "bob", "password": "wrong"}'; done     # 3 failures, then bob is locked 30 s
//! curl -s localhost:3000/login -d '{"user": "bob", "password": "hunter2"}'  # still locked
//! ```
//!
//! Where each piece sits: the layer (outermost) keys every request by peer IP and, on
//! `/api`, by the `x-user` header, and answers 429 itself; the login handler uses the same
//! limiter directly, because whether a login *failed* is known only after the handler ran.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use weir_core::{Clock, Key, Limiter, Lockout, Rule, Store};
use weir_tower::{headers_for, AsDecision, KeyBy, Policy, RateLimitLayer};

/// The app's state: the limiter (shared with the layer) and the login rule.
#[derive(Clone)]
pub struct AppState<S, C> {
    limiter: Limiter<S, C>,
    failed_logins: Rule,
}

/// The app, rate-limited. `limiter` holds every count (here the embedded memory store;
/// `Limiter::new(RedisStore, …)` to share the counts between instances).
pub fn app<S: Store + Clone, C: Clock + Clone>(
    limiter: Limiter<S, C>,
) -> Result<Router, Box<dyn std::error::Error>> {
    // Three failed logins within a minute are all an account gets: the next attempt finds
    // it locked for 30 s (doubling for repeat offenders, up to an hour).
    let failed_logins = Rule::sliding_log(3, Duration::from_secs(60))?.with_lockout(
        Lockout::new(Duration::from_secs(30))?.escalating(Duration::from_secs(3600))?,
    );
    let policies = vec![
        // Every client IP: 20 requests per second, bursts of 40.
        Policy::new("per_ip", Rule::gcra(20, Duration::from_secs(1), 40)?)?.key(KeyBy::peer_ip()),
        // Each user of the API: 5 per second (anonymous requests are not keyed by this one).
        Policy::new("per_user", Rule::per_second(5)?)?
            .path_prefix("/api")
            .key(KeyBy::header("x-user")?),
        // Login attempts per IP, failed or not: 10 a minute, whatever the account.
        Policy::new("login_ip", Rule::sliding_log(10, Duration::from_secs(60))?)?
            .path("/login")
            .key(KeyBy::peer_ip()),
    ];
    let state = AppState {
        limiter: limiter.clone(),
        failed_logins,
    };
    Ok(Router::new()
        .route("/", get(|| async { "hello from behind the weir\n" }))
        .route(
            "/api/search",
            get(|| async { Json(json!({"results": []})) }),
        )
        .route("/login", post(login::<S, C>))
        .with_state(state)
        .layer(RateLimitLayer::new(limiter, policies)?))
}

/// The login lockout flow: a locked account is refused before the password is checked; a
/// failure is counted (past the third in a minute the account is locked); a success clears
/// the count.
async fn login<S: Store + Clone, C: Clock + Clone>(
    State(state): State<AppState<S, C>>,
    body: String,
) -> Response {
    let Ok(form) = serde_json::from_str::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            "expected {\"user\": …, \"password\": …}\n",
        )
            .into_response();
    };
    let (Some(user), Some(password)) = (form["user"].as_str(), form["password"].as_str()) else {
        return (
            StatusCode::BAD_REQUEST,
            "expected {\"user\": …, \"password\": …}\n",
        )
            .into_response();
    };
    let Ok(key) = Key::new(format!("login:{user}")) else {
        return (StatusCode::BAD_REQUEST, "user name too long\n").into_response();
    };
    let rule = &state.failed_logins;
    match state.limiter.inspect(&key, rule).await {
        Ok(usage) if !usage.blocked_for.is_zero() => return locked(rule, &usage),
        Ok(_) => {}
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
    if password == "hunter2" {
        // Success: forget the failures (the strikes that escalate lockouts are forgotten too).
        let _ = state.limiter.reset(&key, rule).await;
        return Json(json!({"welcome": user})).into_response();
    }
    match state.limiter.check(&key, rule, 1).await {
        Ok(d) if d.allowed => (
            StatusCode::UNAUTHORIZED,
            Json(json!({"error": "wrong password", "attempts_left": d.remaining})),
        )
            .into_response(),
        Ok(d) => locked(rule, &d),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

/// The answer for a locked account, with the headers the layer would send (one call, from
/// the denying decision or the inspected lockout): `Retry-After` rounded up, so 29.99 s
/// left is `30`, never `29`.
fn locked(rule: &Rule, answer: &impl AsDecision) -> Response {
    let retry_after_s = weir_tower::ceil_secs(answer.as_decision().retry_after).max(1);
    (
        StatusCode::TOO_MANY_REQUESTS,
        headers_for("failed_logins", rule, answer),
        Json(json!({"error": "account locked", "retry_after_s": retry_after_s})),
    )
        .into_response()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let app = app(Limiter::default())?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    println!("listening on http://{}", listener.local_addr()?);
    // Peer addresses reach the layer's KeyBy::peer_ip through ConnectInfo.
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
