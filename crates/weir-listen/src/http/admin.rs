//! The admin API, mounted under `/admin` only when a token is configured. Every call must
//! carry `Authorization: Bearer <token>` (compared in constant time, never logged);
//! otherwise `401`.
//!
//! | call | what |
//! | --- | --- |
//! | `GET /admin/rules` | the rules in force and the config status |
//! | `GET /admin/config` | the config status (source, generation, last reload, last error) |
//! | `POST /admin/reload` | read the rules again now (`422` and the error if invalid: old rules kept) |
//! | `POST /admin/keys/inspect` | `{"domain", "entries"}` → the key's usage under the rule it matches; changes nothing |
//! | `POST /admin/keys/block` | `{"domain", "entries", "duration_ms"}` → deny it for that long, at most 365 days (31 536 000 000 ms; longer is a 400 and nothing is blocked); answers `blocked_for_ms`, the duration applied (replaces a shorter or longer block; usage and strikes kept) |
//! | `POST /admin/keys/unblock` | let the key try again now: lift its block or lockout and forgive its lockout strikes; under a rule with a lockout, also clear the usage that engaged it (the next attempt is allowed, a later lockout starts at the base duration); under a rule without one, usage is kept |
//! | `POST /admin/keys/reset` | forget everything about the key: usage, block and strikes (as if never seen) |
//! | `GET /admin/top-denied?limit=N` | the most denied keys (a bounded Space-Saving sketch), enforced denials only; denials not enforced (shadow mode, roll-out) apart under `shadow_denied` |
//! | `POST /admin/keys/peek`, `/penalty`, `/reward`, `GET /admin/keys/blocked` | `admin_keys.rs` (merged beside these routes by `router.rs`, behind the same token check) |

use std::time::Duration;

use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use serde_json::json;
use weir_config::{Descriptor, RuleInfo};
use weir_core::{Clock, Key, Rule};

use super::body::EntryBody;
use super::body::{parse, RawBody};
use super::error::{method_not_allowed, ApiError};
use crate::app::App;
use weir_engine::ReloadOutcome;

/// The admin routes (auth included).
pub(crate) fn routes(app: App) -> Router<App> {
    let routes = Router::new()
        .route("/rules", get(rules))
        .route("/config", get(config))
        .route("/reload", post(reload))
        .route("/keys/inspect", post(inspect))
        .route("/keys/block", post(block))
        .route("/keys/unblock", post(unblock))
        .route("/keys/reset", post(reset))
        .route("/top-denied", get(top_denied));
    behind_token(routes, app)
}

/// `routes` behind the token check (`authorize`), a wrong method answered after it (the
/// fallback is set before the check wraps the routes): every admin router's last step.
pub(super) fn behind_token(routes: Router<App>, app: App) -> Router<App> {
    routes
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(app, authorize))
}

/// A query string's fields, or a `400` saying what is wrong with it.
pub(super) fn read_query<T>(query: Result<Query<T>, QueryRejection>) -> Result<T, ApiError> {
    let Query(query) = query.map_err(|rejection| {
        let reason = std::error::Error::source(&rejection)
            .map_or_else(|| rejection.body_text(), ToString::to_string);
        ApiError::bad_request(format!("invalid query string: {reason}"))
    })?;
    Ok(query)
}

/// The token of an `Authorization: Bearer <token>` value; the scheme is case-insensitive
/// (RFC 7235), as clients and proxies send it (`bearer`, `BEARER`).
fn bearer(value: &[u8]) -> Option<&[u8]> {
    let space = value.iter().position(|&b| b == b' ')?;
    let (scheme, rest) = value.split_at(space);
    if !scheme.eq_ignore_ascii_case(b"bearer") {
        return None;
    }
    let token = rest.trim_ascii_start();
    (!token.is_empty()).then_some(token)
}

/// Refused admin calls are logged at most once per this span (with the count since the last
/// WARN): a client hammering the admin API must not flood the log.
const REFUSED_LOG_EVERY_NS: u64 = 10_000_000_000;
static REFUSED_LOGGED_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
static REFUSED_UNLOGGED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn log_refused(app: &App, path: &str) {
    use std::sync::atomic::Ordering::Relaxed;
    let unlogged = REFUSED_UNLOGGED.fetch_add(1, Relaxed) + 1;
    let now = app.engine().limiter().clock().now_ns().max(1);
    let last = REFUSED_LOGGED_NS.load(Relaxed);
    let due = last == 0 || now.saturating_sub(last) >= REFUSED_LOG_EVERY_NS;
    if due
        && REFUSED_LOGGED_NS
            .compare_exchange(last, now, Relaxed, Relaxed)
            .is_ok()
    {
        REFUSED_UNLOGGED.store(0, Relaxed);
        tracing::warn!(
            path,
            refused = unlogged,
            "admin call refused: missing or wrong token"
        );
    }
}

pub(super) async fn authorize(State(app): State<App>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| bearer(v.as_bytes()));
    let ok = match (&app.settings().admin_token, presented) {
        (Some(token), Some(presented)) => token.matches(presented),
        _ => false,
    };
    if !ok {
        app.engine().metrics().admin_unauthorized();
        app.engine().metrics().request("admin", "invalid");
        log_refused(&app, request.uri().path());
        let mut response =
            ApiError::new(StatusCode::UNAUTHORIZED, "missing or wrong admin token").into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            header::HeaderValue::from_static("Bearer"),
        );
        return response;
    }
    app.engine().metrics().request("admin", "ok");
    next.run(request).await
}

#[derive(Debug, Serialize)]
pub(super) struct RuleView {
    id: String,
    domain: String,
    path: Vec<(String, Option<String>)>,
    file: String,
    format: String,
    name: Option<String>,
    replaces: Vec<String>,
    algorithm: &'static str,
    limit: Option<u64>,
    window_ms: Option<u64>,
    cost: u64,
    shadow: bool,
    enforce_percent: u8,
    on_failure: Option<String>,
    /// GCRA's and the token bucket's warm-up, when the rule has one.
    warmup: Option<WarmUpView>,
    /// `exact` or `leased`; `None` without a rule to check (unlimited, deny).
    mode: Option<&'static str>,
    /// The rule's lockout, when it has one.
    lockout: Option<LockoutView>,
}

/// A rule's lockout: the first lasts `duration_ms`, each repeat doubles it up to `max_ms`;
/// strikes are forgotten `forgive_after_ms` after the last one ends.
#[derive(Debug, Serialize)]
pub(super) struct LockoutView {
    duration_ms: u64,
    max_ms: u64,
    forgive_after_ms: u64,
}

/// A rule's warm-up: a cold key gets `1 / cold_factor` of the rate, ramping to the full
/// rate over `period_ms` of use.
#[derive(Debug, Serialize)]
pub(super) struct WarmUpView {
    period_ms: u64,
    cold_factor: u64,
}

pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(super) fn rule_view(info: &RuleInfo) -> RuleView {
    RuleView {
        id: info.id.to_string(),
        domain: info.domain.to_string(),
        path: info.path.clone(),
        file: info.file.display().to_string(),
        format: format!("{:?}", info.format).to_lowercase(),
        name: info.name.as_ref().map(|n| n.to_string()),
        replaces: info.replaces.iter().map(|r| r.to_string()).collect(),
        algorithm: info.algorithm(),
        limit: info.capacity(),
        window_ms: info.window().map(millis),
        cost: info.cost,
        shadow: info.shadow,
        enforce_percent: info.enforce_percent,
        on_failure: info.on_failure().map(|p| format!("{p:?}")),
        warmup: info.rule().and_then(|r| r.warmup()).map(|w| WarmUpView {
            period_ms: w.period_ns() / 1_000_000,
            cold_factor: w.cold_factor(),
        }),
        mode: info.rule().map(|r| r.mode().name()),
        lockout: info.rule().and_then(|r| r.lockout()).map(|l| LockoutView {
            duration_ms: millis(l.duration()),
            max_ms: millis(l.max_duration()),
            forgive_after_ms: millis(l.forgiven_after()),
        }),
    }
}

async fn rules(State(app): State<App>) -> Json<serde_json::Value> {
    let snapshot = app.engine().rules().snapshot();
    let rules: Vec<RuleView> = snapshot.rules.rules().iter().map(rule_view).collect();
    Json(json!({
        "config": app.engine().config_status(),
        "global_shadow": app.engine().global_shadow(),
        "rules": rules,
    }))
}

async fn config(State(app): State<App>) -> Json<serde_json::Value> {
    Json(json!(app.engine().config_status()))
}

async fn reload(State(app): State<App>) -> Response {
    match app.engine().reload().await {
        ReloadOutcome::Swapped(generation) => {
            Json(json!({ "reloaded": true, "generation": generation })).into_response()
        }
        ReloadOutcome::Kept(error) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({ "reloaded": false, "error": error, "kept_generation": app.engine().config_status().generation })),
        )
            .into_response(),
    }
}

/// The longest admin block ([`weir_engine::MAX_BLOCK`], 365 days), in milliseconds. A
/// longer `duration_ms` is refused (400, nothing applied), never clamped silently: the
/// answer's `blocked_for_ms` is always the duration applied.
const MAX_BLOCK_MS: u64 = weir_engine::MAX_BLOCK.as_secs() * 1000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyBody<'a> {
    domain: String,
    #[serde(borrow)]
    entries: Vec<EntryBody<'a>>,
    #[serde(default)]
    pub(super) duration_ms: Option<u64>,
    /// Units of a penalty or a reward (`admin_keys.rs`).
    #[serde(default)]
    pub(super) units: Option<u64>,
}

/// The key and rule a `(domain, entries)` pair is counted under.
pub(super) fn resolve(
    app: &App,
    body: KeyBody<'_>,
) -> Result<(Key, Rule, String, Option<u64>), ApiError> {
    let descriptor = Descriptor::new(body.entries.into_iter().map(|e| (e.key, e.value)));
    let snapshot = app.engine().rules().snapshot();
    let matched = snapshot
        .rules
        .matches(&body.domain, &[descriptor])
        .map_err(|e| ApiError::bad_request(e.to_string()))?
        .into_iter()
        .next()
        .flatten()
        .ok_or_else(|| ApiError::new(StatusCode::NOT_FOUND, "no rule matches these entries"))?;
    let rule = *matched.rule().ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "rule {} is {}: nothing is counted",
                matched.rule_id,
                matched.limit.algorithm()
            ),
        )
    })?;
    Ok((
        matched.key,
        rule,
        matched.rule_id.to_string(),
        body.duration_ms,
    ))
}

fn store_error(error: weir_core::CheckError) -> ApiError {
    ApiError::new(StatusCode::SERVICE_UNAVAILABLE, error.to_string())
}

async fn inspect(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, rule, id, _) = resolve(&app, parse(&body)?)?;
    let usage = app
        .engine()
        .limiter()
        .inspect(&key, &rule)
        .await
        .map_err(store_error)?;
    Ok(Json(json!({
        "rule": id,
        "key": key.to_string(),
        "used": usage.used,
        "limit": usage.limit,
        "remaining": usage.remaining,
        "blocked_for_ms": millis(usage.blocked_for),
        "strikes": usage.strikes,
        "reset_after_ms": millis(usage.reset_after),
    })))
}

async fn block(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, rule, id, duration_ms) = resolve(&app, parse(&body)?)?;
    let duration_ms = duration_ms.filter(|&ms| ms > 0).ok_or_else(|| {
        ApiError::bad_request("duration_ms: a positive number of milliseconds is required")
    })?;
    if duration_ms > MAX_BLOCK_MS {
        return Err(ApiError::bad_request(format!(
            "duration_ms: {duration_ms} is above the maximum of {MAX_BLOCK_MS} (365 days); \
             nothing was blocked"
        )));
    }
    app.engine()
        .limiter()
        .block(&key, &rule, Duration::from_millis(duration_ms))
        .await
        .map_err(store_error)?;
    tracing::info!(rule = %id, duration_ms, "admin: key blocked");
    Ok(Json(
        json!({ "rule": id, "key": key.to_string(), "blocked_for_ms": duration_ms }),
    ))
}

/// What `unblock` and `reset` do to a key: one limiter verb that answers nothing but
/// success, named in the log and in the answer.
#[derive(Debug, Clone, Copy)]
enum Clear {
    Unblock,
    Reset,
}

async fn clear(app: &App, body: &[u8], verb: Clear) -> Result<Json<serde_json::Value>, ApiError> {
    let (key, rule, id, _) = resolve(app, parse(body)?)?;
    let limiter = app.engine().limiter();
    let (done, field) = match verb {
        Clear::Unblock => (limiter.unblock(&key, &rule).await, "unblocked"),
        Clear::Reset => (limiter.reset(&key, &rule).await, "reset"),
    };
    done.map_err(store_error)?;
    tracing::info!(rule = %id, "admin: key {field}");
    let mut answer = json!({ "rule": id, "key": key.to_string() });
    answer[field] = json!(true);
    Ok(Json(answer))
}

async fn unblock(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    clear(&app, &body, Clear::Unblock).await
}

async fn reset(
    State(app): State<App>,
    RawBody(body): RawBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    clear(&app, &body, Clear::Reset).await
}

#[derive(Debug, Deserialize)]
struct TopQuery {
    limit: Option<usize>,
}

async fn top_denied(
    State(app): State<App>,
    query: Result<Query<TopQuery>, QueryRejection>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let query = read_query(query)?;
    let sketch = app.engine().top_denied();
    let n = query.limit.unwrap_or(20).min(sketch.capacity());
    let (keys, total) = sketch.top(n);
    let (shadow_keys, shadow_total) = app.engine().top_shadow_denied().top(n);
    Ok(Json(json!({
        "total_denials": total,
        "capacity": sketch.capacity(),
        "keys": keys,
        "shadow_denied": { "total_denials": shadow_total, "keys": shadow_keys },
    })))
}

#[cfg(test)]
mod tests {
    use super::{bearer, rule_view};
    use weir_config::RuleSet;

    /// The rule listing (and the dashboard, which reads it) shows a rule's warm-up.
    #[test]
    fn the_rule_view_shows_warm_up() {
        let yaml = "domain: api\ndescriptors:\n  - key: user\n    rule:\n      algorithm: gcra\n      rate: 100\n      per: 1s\n      burst: 100\n      warmup: 30s\n      cold_factor: 4\n  - key: ip\n    rate_limit: {unit: second, requests_per_unit: 5}\n";
        let rules = RuleSet::parse("api.yaml", yaml).unwrap_or_else(|e| unreachable!("{e}"));
        let views: Vec<serde_json::Value> = rules
            .rules()
            .iter()
            .map(|info| serde_json::to_value(rule_view(info)).unwrap_or_default())
            .collect();
        assert_eq!(
            views[0]["warmup"],
            serde_json::json!({"period_ms": 30_000, "cold_factor": 4})
        );
        assert!(views[1]["warmup"].is_null());
    }

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"BEARER   abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer "), None);
        assert_eq!(bearer(b"Bearerabc"), None);
    }
}
