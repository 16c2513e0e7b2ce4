//! envoyproxy/ratelimit's debug listener (`DEBUG_HOST` / `DEBUG_PORT`) for `weir serve`:
//! `GET /rlconfig` answers the rules in force as ratelimit dumps its configuration, one line
//! per rule, `<rule id>: unit=MINUTE requests_per_unit=4, shadow_mode: false, quota_mode:
//! false` (a rule id is ratelimit's full key; Weir's `rule:` blocks show their algorithm
//! instead of a unit). Read-only; any other path is a 404 (ratelimit's `/stats` and pprof
//! are not served: `/metrics` on the HTTP port has the counters). Served on weir-listen's
//! listener core (`serve_service_with`: connection cap, header-read timeout, graceful
//! close), started only when ratelimit's variables ask for it.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::future::Future;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use weir_config::{Limit, RuleSet};
use weir_engine::Engine;
use weir_listen::{serve_service_with, HttpLimits, Peer};

/// The dump of `rules`, as ratelimit's `/rlconfig` writes it.
pub(crate) fn dump(rules: &RuleSet) -> String {
    let mut out = String::new();
    for rule in rules.rules() {
        let _ = write!(out, "{}: ", rule.id);
        match (&rule.rate_limit, &rule.limit) {
            (Some(spec), _) => {
                let _ = write!(
                    out,
                    "unit={} requests_per_unit={}",
                    spec.unit.name().to_ascii_uppercase(),
                    spec.requests_per_unit
                );
                if spec.unit_multiplier != 1 {
                    let _ = write!(out, " unit_multiplier={}", spec.unit_multiplier);
                }
            }
            (None, Limit::Unlimited) => out.push_str("unit=UNKNOWN requests_per_unit=0"),
            (None, _) => {
                let _ = write!(out, "algorithm={}", rule.algorithm());
            }
        }
        let _ = writeln!(
            out,
            ", shadow_mode: {}, quota_mode: {}",
            rule.shadow, rule.quota_mode
        );
    }
    out
}

/// Serves the debug listener on `listener` until `shutdown` completes.
pub(crate) fn spawn(
    listener: TcpListener,
    engine: Engine,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> JoinHandle<std::io::Result<()>> {
    let service = tower::service_fn(move |request: Request<Incoming>| {
        let engine = engine.clone();
        async move {
            let (status, body) = if request.uri().path() == "/rlconfig" {
                (StatusCode::OK, dump(&engine.rules().snapshot().rules))
            } else {
                (
                    StatusCode::NOT_FOUND,
                    "not found: Weir's debug listener serves /rlconfig (metrics are on the HTTP port's /metrics)\n"
                        .to_string(),
                )
            };
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = status;
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            Ok::<_, Infallible>(response)
        }
    });
    let limits = HttpLimits::new(std::time::Duration::from_secs(10));
    tokio::spawn(serve_service_with(
        listener,
        service,
        limits,
        Peer::Unrecorded,
        shutdown,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dump_is_ratelimits() {
        let rules = RuleSet::parse(
            "rl.yaml",
            "domain: rl\ndescriptors:\n  - key: category\n    value: account\n    rate_limit: {unit: minute, requests_per_unit: 4}\n  - key: qux\n    rate_limit: {unlimited: true}\n  - key: s\n    shadow_mode: true\n    rule: {algorithm: gcra, rate: 1, per: 1s, burst: 1}\n",
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            dump(&rules),
            "rl.category_account: unit=MINUTE requests_per_unit=4, shadow_mode: false, quota_mode: false\n\
             rl.qux: unit=UNKNOWN requests_per_unit=0, shadow_mode: false, quota_mode: false\n\
             rl.s: algorithm=gcra, shadow_mode: true, quota_mode: false\n"
        );
    }
}
