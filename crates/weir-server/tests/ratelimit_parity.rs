//! Answers envoyproxy/ratelimit's users rely on, over a real gRPC connection (tonic client,
//! loopback socket): `quota_mode` (ratelimit's quota example as Weir's own fixture,
//! replayed as its quota integration script does, and its service tests' mixes),
//! `duration_until_reset` as upstream computes it, `limit_remaining` on a denial, and an
//! unknown domain. Time moves only by `ManualClock::advance`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use serde_json::{json, Value};
use tonic::transport::Channel;
use weir_core::ManualClock;

use common::{
    bounded, check_body, descriptor, envoy_readme_dir, request, settings, Scratch, TestServer,
};

type Rls = RateLimitServiceClient<Channel>;

/// ratelimit's quota example (service_1: 1 a minute, service_2: 2), weir-config's own fixture.
fn upstream_quota_yaml() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../weir-config/tests/fixtures/quota/two_services.yaml")
}

/// A server on `rules` (under the global shadow mode if asked), a gRPC client to it, and
/// its clock (at a day boundary).
async fn serve(rules: &Path, global_shadow: bool) -> (TestServer, Rls, ManualClock) {
    let (mut settings, clock) = settings(Some(rules));
    settings.engine.shadow = global_shadow;
    let server = TestServer::start(settings).await;
    let rls = server.grpc_client().await;
    (server, rls, clock)
}

/// Asks `domain` about one descriptor per `key=value` word of `sent`, with `hits`.
async fn ask(rls: &mut Rls, domain: &str, sent: &str, hits: u32) -> RateLimitResponse {
    let descriptors = sent
        .split(' ')
        .map(|entry| {
            let (key, value) = entry.split_once('=').unwrap();
            descriptor(&[(key, value)])
        })
        .collect();
    let mut r = request(domain, descriptors);
    r.hits_addend = hits;
    rls.should_rate_limit(r).await.unwrap().into_inner()
}

/// The overall code and each status's, in short: `"ok: over ok"`.
fn summary(r: &RateLimitResponse) -> String {
    let short = |code: i32| match Code::try_from(code).unwrap() {
        Code::Ok => "ok",
        Code::OverLimit => "over",
        Code::Unknown => "unknown",
    };
    let statuses: Vec<&str> = r.statuses.iter().map(|s| short(s.code)).collect();
    format!("{}: {}", short(r.overall_code), statuses.join(" "))
}

/// `(requests_per_unit, unit)` of a status's `current_limit`.
fn limit(s: &DescriptorStatus) -> (u32, Unit) {
    let l = s.current_limit.as_ref().unwrap();
    (l.requests_per_unit, Unit::try_from(l.unit).unwrap())
}

fn secs(seconds: i64) -> Option<ProtoDuration> {
    Some(ProtoDuration { seconds, nanos: 0 })
}

/// quota.sh: each request to `/quota` sends `(service, service_1)` and `(service,
/// service_2)`; service_1 allows 1 a minute, service_2 2. The second request is over
/// service_1's quota but within service_2's: allowed. The third is over both: denied. A
/// minute later both are refilled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_quota_example_denies_only_when_every_quota_is_spent() {
    bounded(async {
        let (server, mut rls, clock) = serve(&upstream_quota_yaml(), false).await;
        let both = "service=service_1 service=service_2";
        assert_eq!(summary(&ask(&mut rls, "quota", both, 0).await), "ok: ok ok");
        let r = ask(&mut rls, "quota", both, 0).await;
        assert_eq!(summary(&r), "ok: over ok", "one quota left");
        assert_eq!(r.statuses[1].limit_remaining, 0, "service_2's last unit");
        let r = ask(&mut rls, "quota", both, 0).await;
        assert_eq!(summary(&r), "over: over over");

        // /v1/check decides the same way: 429 when every quota is spent, 200 while one is left.
        let http = json!({"domain": "quota", "descriptors": [
            {"entries": [{"key": "service", "value": "service_1"}]},
            {"entries": [{"key": "service", "value": "service_2"}]},
        ]})
        .to_string();
        assert_eq!(server.post("/v1/check", &http).await.status, 429);

        clock.advance(Duration::from_secs(60));
        let r = ask(&mut rls, "quota", both, 0).await;
        assert_eq!(summary(&r), "ok: ok ok", "refreshed");
        let a = server.post("/v1/check", &http).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["descriptors"][0]["code"], "OVER_LIMIT");
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

const MIXED: &str = "\
domain: mixed
descriptors:
  - key: regular
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota_a
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota_b
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 3}
  - key: quota_shadow
    quota_mode: true
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: quota_unlimited
    quota_mode: true
    rate_limit: {unlimited: true}
  - key: quota_weir
    quota_mode: true
    rule: {algorithm: gcra, rate: 1, per: 1m, burst: 1}
";

/// The overall code is OVER_LIMIT iff a descriptor without quota mode is over its limit,
/// or every quota-mode descriptor is (upstream's service tests: per-descriptor quota mode,
/// mixed modes, quota only, with shadow mode, and unlimited descriptors left out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quota_mode_combines_with_rate_limits_as_upstream_does() {
    bounded(async {
        let dir = Scratch::new("quota-mixed");
        let (server, mut rls, _clock) = serve(&dir.write("mixed.yaml", MIXED), false).await;
        // (descriptors, answer), in order: each step spends what it says.
        let steps = [
            ("quota_a=x", "ok: ok"),
            ("quota_a=x", "over: over"), // one quota alone is every quota
            ("quota_a=x quota_b=x", "ok: over ok"), // one quota left
            ("regular=r", "ok: ok"),
            ("regular=r quota_b=x", "over: over ok"), // a rate limit over denies
            ("regular=new quota_a=x", "over: ok over"), // every quota spent
            ("quota_shadow=s", "ok: ok"),
            ("quota_a=x quota_shadow=s", "ok: over ok"), // a shadow denial spends none
            ("quota_a=x quota_unlimited=u", "over: over ok"), // unlimited is no quota
            ("quota_weir=w", "ok: ok"),
            ("quota_a=x quota_weir=w", "over: over over"), // a Weir rule is a quota too
            ("quota_weir=w quota_b=y", "ok: over ok"),
        ];
        for (sent, expected) in steps {
            let r = ask(&mut rls, "mixed", sent, 0).await;
            assert_eq!(summary(&r), expected, "{sent}");
        }
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

/// Under the global shadow mode every quota may be spent and the answer is still OK, the
/// statuses keeping OVER_LIMIT (upstream's `TestServiceQuotaModeWithShadowMode`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_shadow_mode_overrides_spent_quotas() {
    bounded(async {
        let (server, mut rls, _clock) = serve(&upstream_quota_yaml(), true).await;
        let both = "service=service_1 service=service_2";
        for expected in ["ok: ok ok", "ok: over ok", "ok: over over"] {
            assert_eq!(summary(&ask(&mut rls, "quota", both, 0).await), expected);
        }
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

/// Upstream answers `duration_until_reset` in whole seconds: the unit's length minus the
/// current Unix second modulo it (`utils.CalculateReset`), so a `second` rule always says
/// 1 s. Weir said the exact remainder (0.7 s, 47.7 s), which Envoy reads as whole seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duration_until_reset_is_upstreams_whole_seconds() {
    bounded(async {
        let (server, mut rls, clock) = serve(&envoy_readme_dir(), false).await;
        // 12.3 s into a day (so into a minute, an hour and a day alike).
        clock.advance(Duration::from_millis(12_300));
        let cases = [
            ("mongo_cps", "database=users", 0, "ok: ok", 1), // second: 1 - 12 % 1
            ("internal", "azure=x", 0, "ok: ok", 48),        // minute: 60 - 12 % 60
            ("messaging", "to_number=2061111111", 0, "ok: ok", 86_388), // day
            (
                "edge_proxy_per_ip",
                "remote_address=50.0.0.5",
                0,
                "over: over",
                1,
            ), // blocked
            ("internal", "azure=y", 100, "ok: ok", 48),      // the whole minute's limit
            ("internal", "azure=y", 0, "over: over", 48),    // then denied
        ];
        for (domain, sent, hits, expected, reset) in cases {
            let r = ask(&mut rls, domain, sent, hits).await;
            assert_eq!(summary(&r), expected, "{sent}");
            assert_eq!(r.statuses[0].duration_until_reset, secs(reset), "{sent}");
        }
        // Protobuf JSON (`/json`) renders the same message.
        let a = server
            .post("/json", &check_body("mongo_cps", &[("database", "users")]))
            .await;
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["statuses"][0]["durationUntilReset"], "1s", "{}", a.body);
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

const MULTIPLIED: &str = "\
domain: multiplied
descriptors:
  - key: five_minutes
    rate_limit: {unit: minute, unit_multiplier: 5, requests_per_unit: 10}
  - key: weir
    rule: {algorithm: fixed_window, limit: 7, window: 10s}
";

/// A `unit_multiplier` (Weir's extension: upstream has no such field) resets at the end of
/// its epoch-aligned window, and its `current_limit` is the exact rate in the nearest unit
/// (10 per 5 minutes is 2 per minute, not 10 per minute). A Weir rule's reset is rounded
/// up to whole seconds too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_multiplier_and_weir_rules_answer_in_whole_seconds() {
    bounded(async {
        let dir = Scratch::new("multiplied");
        let rules = dir.write("multiplied.yaml", MULTIPLIED);
        let (server, mut rls, clock) = serve(&rules, false).await;
        clock.advance(Duration::from_millis(12_300));
        let r = ask(&mut rls, "multiplied", "five_minutes=x", 0).await;
        assert_eq!(limit(&r.statuses[0]), (2, Unit::Minute));
        assert_eq!(r.statuses[0].duration_until_reset, secs(288), "300 - 12");
        let r = ask(&mut rls, "multiplied", "weir=x", 0).await;
        assert_eq!(limit(&r.statuses[0]), (42, Unit::Minute));
        assert_eq!(r.statuses[0].duration_until_reset, secs(8), "7.7 s up");
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

/// Upstream reports `limit_remaining: 0` for every OVER_LIMIT status, including a request
/// whose hits exceed the whole limit (Weir reported the untouched 500).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_reports_no_remaining_even_when_hits_exceed_the_whole_limit() {
    bounded(async {
        let (server, mut rls, _clock) = serve(&envoy_readme_dir(), false).await;
        let r = ask(&mut rls, "mongo_cps", "database=users", 501).await;
        assert_eq!(summary(&r), "over: over");
        let s = &r.statuses[0];
        assert_eq!(s.limit_remaining, 0);
        assert_eq!(limit(s), (500, Unit::Second));
        assert_eq!(s.duration_until_reset, secs(1));

        let cases = [
            ("mongo_cps", "database=users", 499, "ok: ok", 1),
            // Over what is left: also 0, as upstream.
            ("mongo_cps", "database=users", 2, "over: over", 0),
            // Weir charges no denied hits (upstream's counter keeps them): the last unit is
            // still there for a request that fits.
            ("mongo_cps", "database=users", 1, "ok: ok", 0),
        ];
        for (domain, sent, hits, expected, remaining) in cases {
            let r = ask(&mut rls, domain, sent, hits).await;
            assert_eq!(summary(&r), expected, "{hits}");
            assert_eq!(r.statuses[0].limit_remaining, remaining, "{hits}");
        }
        // A shadow rule's denial is OK with 0 remaining too (example 6, user-a: 10/s).
        let mut user_a = request(
            "example6",
            vec![descriptor(&[
                ("service", "auth-service"),
                ("user", "user-a"),
            ])],
        );
        user_a.hits_addend = 11;
        let r = rls.should_rate_limit(user_a).await.unwrap().into_inner();
        assert_eq!(summary(&r), "ok: ok");
        assert_eq!(r.statuses[0].limit_remaining, 0);
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

/// A domain no rule file defines limits nothing, on every API, as upstream answers it: OK,
/// one status per descriptor, no limit (a limit override included: upstream ignores it
/// for an unknown domain).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_domain_is_ok_on_every_api() {
    bounded(async {
        let (server, mut rls, _clock) = serve(&envoy_readme_dir(), false).await;
        let mut overridden = descriptor(&[("a", "b")]);
        overridden.limit = Some(RateLimitOverride {
            requests_per_unit: 0,
            unit: Unit::Second as i32,
        });
        let r = request("nowhere", vec![descriptor(&[("a", "b")]), overridden]);
        let r = rls.should_rate_limit(r).await.unwrap().into_inner();
        assert_eq!(summary(&r), "ok: ok ok");
        let bare = DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        };
        assert_eq!(r.statuses, [bare.clone(), bare]);
        assert!(r.response_headers_to_add.is_empty());

        let body = check_body("nowhere", &[("a", "b")]);
        let a = server.post("/json", &body).await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(
            serde_json::from_str::<Value>(&a.body).unwrap(),
            json!({"overallCode": "OK", "statuses": [{"code": "OK"}]})
        );
        let a = server.post("/v1/check", &body).await;
        assert_eq!(a.status, 200, "{}", a.body);
        assert_eq!(
            serde_json::from_str::<Value>(&a.body).unwrap(),
            json!({"overall_code": "OK", "descriptors": [{"code": "OK", "rule": null}]})
        );
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}
