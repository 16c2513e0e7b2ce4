//! `POST /v1/acquire` and `POST /v1/release`: concurrency (lease) rules through the server.
//! A check counts requests; a lease counts what is running now, so it needs a holder and
//! an end: the client acquires before the work and releases after it (or the lease
//! expires after `ttl_ms`, so a crashed client frees its slot).
//!
//! ```text
//! POST /v1/acquire {"domain": "jobs", "entries": [{"key": "export", "value": "acme"}],
//!                   "holder": "worker-7:job-42", "ttl_ms": 30000}
//!   200 {"acquired": true,  "rule": "jobs.export", "limit": 2, "remaining": 1}
//!   429 {"acquired": false, "rule": "jobs.export", "limit": 2, "remaining": 0,
//!        "retry_after_ms": 12000}                              (+ Retry-After, seconds)
//! POST /v1/release {"domain": "jobs", "entries": [...], "holder": "worker-7:job-42"}
//!   200 {"released": true, "rule": "jobs.export"}   (false: no live lease for that holder)
//! ```
//!
//! The entries are one descriptor, matched like `/v1/check`'s. No matching rule (or an
//! unknown domain) limits nothing: acquire answers `acquired: true, rule: null` and
//! release `released: false`. A rule that is not `concurrency` is a `409` (use
//! `/v1/check`). Acquiring is re-entrant per holder (a second acquire adds a hold and
//! moves the expiry to the later of the two; each release drops one). Leases are always
//! enforced: shadow mode and `enforce_percent` apply to checks only.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use weir_config::Descriptor;
use weir_core::{Algorithm, CheckError, Key, Rule};

use weir_listen::http::{parse, EntryBody, JsonType, RawBody};

use crate::app::App;
use crate::headers::ceil_secs;
use weir_engine::DecisionOutcome;
use weir_listen::http::ApiError;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseBody<'a> {
    domain: String,
    #[serde(borrow)]
    entries: Vec<EntryBody<'a>>,
    holder: String,
    /// How long the lease lives unless released (acquire only).
    #[serde(default)]
    ttl_ms: Option<u64>,
}

/// The matched lease rule: its key, rule and id; `None` when no rule matches.
fn resolve(app: &App, body: &LeaseBody<'_>) -> Result<Option<(Key, Rule, String)>, ApiError> {
    if body.domain.is_empty() {
        return Err(ApiError::bad_request("domain must not be empty"));
    }
    if body.entries.is_empty() {
        return Err(ApiError::bad_request("entries must not be empty"));
    }
    let descriptor = Descriptor::new(
        body.entries
            .iter()
            .map(|e| (e.key.clone(), e.value.clone())),
    );
    let snapshot = app.engine().rules().snapshot();
    let matched = match snapshot.rules.matches(&body.domain, &[descriptor]) {
        Ok(matched) => matched.into_iter().next().flatten(),
        Err(weir_config::MatchError::UnknownDomain(_)) => None,
        Err(other) => return Err(ApiError::bad_request(other.to_string())),
    };
    let Some(matched) = matched else {
        return Ok(None);
    };
    match matched.rule().copied() {
        Some(rule) if matches!(rule.algorithm(), Algorithm::Concurrency(_)) => {
            Ok(Some((matched.key, rule, matched.rule_id.to_string())))
        }
        _ => Err(ApiError::new(
            StatusCode::CONFLICT,
            format!(
                "rule {} is {}, not concurrency: ask POST /v1/check",
                matched.rule_id,
                matched.limit.algorithm()
            ),
        )),
    }
}

fn failed(error: CheckError) -> ApiError {
    match error {
        CheckError::Store(e) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        other => ApiError::bad_request(other.to_string()),
    }
}

/// Counts a refused lease call (`weir_requests_total{api="lease"}`) and renders it.
fn refused(app: &App, error: ApiError) -> Response {
    let client = error.status.is_client_error();
    app.engine()
        .metrics()
        .request("lease", if client { "invalid" } else { "error" });
    error.into_response()
}

/// `POST /v1/acquire`.
pub(crate) async fn acquire(
    State(app): State<App>,
    JsonType(json): JsonType,
    RawBody(body): RawBody,
) -> Response {
    if let Err(error) = json {
        return refused(&app, error);
    }
    match try_acquire(&app, &body).await {
        Ok(response) => response,
        Err(error) => refused(&app, error),
    }
}

/// `POST /v1/release`.
pub(crate) async fn release(
    State(app): State<App>,
    JsonType(json): JsonType,
    RawBody(body): RawBody,
) -> Response {
    if let Err(error) = json {
        return refused(&app, error);
    }
    match try_release(&app, &body).await {
        Ok(response) => response,
        Err(error) => refused(&app, error),
    }
}

/// The longest lease lifetime accepted (1 hour). A holder renews by acquiring again.
pub(crate) const MAX_TTL_MS: u64 = 3_600_000;

async fn try_acquire(app: &App, body: &Bytes) -> Result<Response, ApiError> {
    let body: LeaseBody = parse(body)?;
    let ttl_ms = body
        .ttl_ms
        .filter(|&ms| ms > 0)
        .ok_or_else(|| ApiError::bad_request("ttl_ms: a lease needs a lifetime above 0 ms"))?;
    if ttl_ms > MAX_TTL_MS {
        return Err(ApiError::bad_request(format!(
            "ttl_ms: {ttl_ms} is above the maximum of {MAX_TTL_MS} (1 hour): a lease that \
             outlives its holder would hold a slot for that long"
        )));
    }
    let Some((key, rule, id)) = resolve(app, &body)? else {
        app.engine().metrics().request("lease", "ok");
        return Ok(Json(json!({"acquired": true, "rule": null})).into_response());
    };
    let decision = app
        .engine()
        .limiter()
        .acquire(&key, &rule, &body.holder, Duration::from_millis(ttl_ms))
        .await
        .map_err(failed)?;
    let snapshot = app.engine().rules().snapshot();
    snapshot.counters.matched(
        &body.domain,
        &id,
        DecisionOutcome::of(Some(&decision), false),
    );
    let mut answer = json!({
        "acquired": decision.allowed,
        "rule": id,
        "limit": decision.limit,
        "remaining": decision.remaining,
    });
    if decision.allowed {
        app.engine().metrics().request("lease", "ok");
        return Ok(Json(answer).into_response());
    }
    app.engine().metrics().request("lease", "over_limit");
    let retry_ms = u64::try_from(decision.retry_after.as_millis()).unwrap_or(u64::MAX);
    answer["retry_after_ms"] = json!(retry_ms);
    let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(answer)).into_response();
    response.headers_mut().insert(
        header::RETRY_AFTER,
        HeaderValue::from(ceil_secs(decision.retry_after)),
    );
    Ok(response)
}

async fn try_release(app: &App, body: &Bytes) -> Result<Response, ApiError> {
    let body: LeaseBody = parse(body)?;
    if body.ttl_ms.is_some() {
        return Err(ApiError::bad_request(
            "ttl_ms: only acquire takes a lifetime",
        ));
    }
    let Some((key, rule, id)) = resolve(app, &body)? else {
        app.engine().metrics().request("lease", "ok");
        return Ok(Json(json!({"released": false, "rule": null})).into_response());
    };
    let released = app
        .engine()
        .limiter()
        .release(&key, &rule, &body.holder)
        .await
        .map_err(failed)?;
    app.engine().metrics().request("lease", "ok");
    Ok(Json(json!({"released": released, "rule": id})).into_response())
}
