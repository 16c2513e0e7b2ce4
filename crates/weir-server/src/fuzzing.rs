//! Entry points for the fuzz targets (`fuzz/`) and the stable fuzz smoke test
//! (`tests/fuzz_smoke.rs`): the three ways a request's bytes reach the decision path —
//! a `/v1/check` body, a `/json` body, a raw Envoy RLS `RateLimitRequest` — parsed and
//! matched against rules exactly as the server does, without a socket; and a `/v1/check`
//! body answered in full (`check_response`: what `tests/allocations.rs` counts). Not part
//! of the API; hidden from the docs.

use axum::body::Bytes;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use prost::Message as _;
use weir_config::RuleSet;

use crate::http::check::CheckBody;
use crate::http::json::JsonRequest;
use crate::rls;
use weir_engine::CheckRequest;
use weir_listen::http::parse;

/// A `POST /v1/check` body → the request the engine decides, or the 400 message.
///
/// # Panics
///
/// When the hand reader of the common shape (`http/check_fast.rs`) reads `bytes` other
/// than `serde_json` does: the fuzz target's finding.
pub fn check_body(bytes: &[u8]) -> Result<CheckRequest, String> {
    let by_serde = parse::<CheckBody>(bytes).and_then(CheckBody::into_request);
    let request = crate::http::check::check_request(bytes).map_err(|e| e.message)?;
    assert_eq!(
        Some(&request),
        by_serde.as_ref().ok(),
        "the hand reader and serde_json disagree on {:?}",
        String::from_utf8_lossy(bytes)
    );
    let owned = |s: std::borrow::Cow<'_, str>| s.into_owned();
    Ok(CheckRequest {
        domain: owned(request.domain),
        descriptors: request
            .descriptors
            .into_iter()
            .map(|d| weir_config::Descriptor {
                entries: d
                    .entries
                    .into_iter()
                    .map(|(k, v)| (owned(k), owned(v)))
                    .collect(),
                hits_addend: d.hits_addend,
                limit: d.limit,
            })
            .collect(),
        hits_addend: request.hits_addend,
    })
}

/// A `POST /v1/check` body (sent as JSON) answered as the HTTP listener answers it once
/// the body has arrived: parsed, decided by `app`'s engine, rendered.
pub async fn check_response(
    app: &crate::App,
    body: &[u8],
) -> axum::http::Response<http_body_util::Full<Bytes>> {
    crate::http::check::answer(app, Ok(()), body).await
}

/// A `POST /json` body → the request the engine decides, or the 400 message.
pub fn json_body(bytes: &[u8]) -> Result<CheckRequest, String> {
    let proto = parse::<JsonRequest>(&Bytes::copy_from_slice(bytes))
        .and_then(JsonRequest::into_proto)
        .map_err(|e| e.message)?;
    rls::check_request(proto).map_err(|e| e.to_string())
}

/// A protobuf-encoded `RateLimitRequest` (a gRPC message's payload) → the request, or why
/// not.
pub fn rls_request(bytes: &[u8]) -> Result<CheckRequest, String> {
    let proto = RateLimitRequest::decode(bytes).map_err(|e| e.to_string())?;
    rls::check_request(proto).map_err(|e| e.to_string())
}

/// Matches a decoded request against `rules` as the engine does; the number of matched
/// descriptors, or the error's message. Never "unlimited" by error: an error is returned.
pub fn match_request(rules: &RuleSet, request: &CheckRequest) -> Result<usize, String> {
    let matched = rules
        .matches(&request.domain, &request.descriptors)
        .map_err(|e| e.to_string())?;
    Ok(matched.iter().flatten().count())
}
