//! The admin API's reading and nudging verbs on one key, and the list of blocked keys:
//! merged by `router.rs` beside `admin.rs`'s routes under `/admin`, behind the same token
//! check (`admin::authorize`), beside `inspect`, `block`, `unblock` and
//! `reset`. Each resolves `(domain, entries)` to the key and rule a decision would use
//! (`admin.rs`'s `resolve`, the rules in force) and runs one limiter verb through the
//! engine's limiter (the same store, lease and failover guards a decision goes through).
//!
//! | call | what |
//! | --- | --- |
//! | `POST /admin/keys/peek` | `{"domain", "entries"}` → whether one more request would pass now, and what a check would answer; consumes nothing |
//! | `POST /admin/keys/penalty` | `{"domain", "entries", "units"}` → add `units` (default 1) of usage (a request found expensive after the fact); answers the state after, as a peek |
//! | `POST /admin/keys/reward` | `{"domain", "entries", "units"}` → give `units` (default 1) of usage back (a request that turned out free); answers the state after |
//! | `GET /admin/keys/blocked?limit=N` | the keys blocked now, by hand or by a lockout: at most `N` (default 100, at most 1000), blocked longest first, and the count of all; memory store only (`409` on a network store, saying why) |
//!
//! Neither penalty nor reward lifts a block or a lockout: a blocked key stays denied until
//! the block ends or `unblock` / `reset` is called.

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::json;
use weir_core::{CheckError, Decision};

use super::admin::{behind_token, millis, read_query, resolve, KeyBody};
use super::body::{parse, RawBody};
use super::error::ApiError;
use crate::app::App;

/// The most blocked keys one call lists.
const MAX_BLOCKED_LISTED: usize = 1000;
/// The blocked keys listed without a `limit`.
const DEFAULT_BLOCKED_LISTED: usize = 100;

/// These routes, relative to `/admin` (auth included).
pub(crate) fn routes(app: App) -> Router<App> {
    let routes = Router::new()
        .route("/keys/peek", post(peek))
        .route("/keys/penalty", post(penalty))
        .route("/keys/reward", post(reward))
        .route("/keys/blocked", get(blocked));
    behind_token(routes, app)
}

/// A limiter error as an answer: the store failing is `503`; a verb the rule's algorithm
/// does not take, or units it can never hold, is the caller's mistake (`409`, `422`).
fn verb_error(error: CheckError) -> ApiError {
    let status = match &error {
        CheckError::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
        CheckError::Unsupported { .. } => StatusCode::CONFLICT,
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    };
    ApiError::new(status, error.to_string())
}

/// The decision's fields, as `/v1/check` names them.
fn decision_json(rule: &str, key: &str, d: &Decision) -> serde_json::Value {
    json!({
        "rule": rule,
        "key": key,
        "allowed": d.allowed,
        "limit": d.limit,
        "remaining": d.remaining,
        "reset_after_ms": millis(d.reset_after),
        "retry_after_ms": millis(d.retry_after),
    })
}

/// `units`: absent is 1; zero is refused (it would do nothing and look as if it had).
fn units(units: Option<u64>) -> Result<u64, ApiError> {
    match units {
        None => Ok(1),
        Some(0) => Err(ApiError::bad_request(
            "units: a positive number of units is required",
        )),
        Some(n) => Ok(n),
    }
}

async fn peek(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    let body: KeyBody<'_> = parse(&body)?;
    if body.units.is_some() || body.duration_ms.is_some() {
        return Err(ApiError::bad_request(
            "peek takes only domain and entries: it changes nothing",
        ));
    }
    let (key, rule, id, _) = resolve(&app, body)?;
    let decision = app
        .engine()
        .limiter()
        .peek(&key, &rule)
        .await
        .map_err(verb_error)?;
    Ok(Json(decision_json(&id, &key.to_string(), &decision)))
}

/// The two verbs that move a key's usage by `units`, answered as a peek of the state after.
#[derive(Debug, Clone, Copy)]
enum Nudge {
    /// Add usage (a request found expensive after the fact).
    Penalty,
    /// Give usage back (a request that turned out free).
    Reward,
}

async fn nudge(app: &App, body: &[u8], verb: Nudge) -> Result<Json<serde_json::Value>, ApiError> {
    let body: KeyBody<'_> = parse(body)?;
    let n = units(body.units)?;
    let (key, rule, id, _) = resolve(app, body)?;
    let limiter = app.engine().limiter();
    let (decision, field, done) = match verb {
        Nudge::Penalty => (
            limiter.penalty(&key, &rule, n).await,
            "penalized",
            "penalty applied",
        ),
        Nudge::Reward => (
            limiter.reward(&key, &rule, n).await,
            "rewarded",
            "reward given",
        ),
    };
    let decision = decision.map_err(verb_error)?;
    tracing::info!(rule = %id, units = n, "admin: {done}");
    let mut answer = decision_json(&id, &key.to_string(), &decision);
    answer[field] = json!(n);
    Ok(Json(answer))
}

async fn penalty(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    nudge(&app, &body, Nudge::Penalty).await
}

async fn reward(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    nudge(&app, &body, Nudge::Reward).await
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockedQuery {
    limit: Option<usize>,
}

async fn blocked(
    State(app): State<App>,
    query: Result<Query<BlockedQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let query = read_query(query)?;
    let limit = query.limit.unwrap_or(DEFAULT_BLOCKED_LISTED);
    if limit > MAX_BLOCKED_LISTED {
        return Err(ApiError::bad_request(format!(
            "limit: at most {MAX_BLOCKED_LISTED} keys are listed in one call"
        )));
    }
    let store = app.engine().store().kind();
    let list = app.engine().blocked_keys(limit).ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "the {store} store cannot list its blocked keys: it holds the blocks of \
                 every instance and listing them would scan the shared server; ask about \
                 one key with POST /admin/keys/inspect (only the memory store lists them)"
            ),
        )
    })?;
    Ok(Json(json!({
        "store": store,
        "total": list.total,
        "listed": list.keys.len(),
        "keys": list.keys,
    })))
}
