//! Scenarios run against every store (memory here, Redis and memcached in their own test
//! files): the envoyproxy/ratelimit README examples over gRPC, and `/v1/check` with its
//! headers and 429. Time moves only by `ManualClock::advance`.

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use serde_json::{json, Value};
use weir_core::ManualClock;

use super::{check_body, descriptor, request, TestServer};

fn codes(response: &RateLimitResponse) -> Vec<Code> {
    response
        .statuses
        .iter()
        .map(|s| Code::try_from(s.code).unwrap())
        .collect()
}

fn limit(status: &DescriptorStatus) -> Option<(u32, Unit)> {
    status
        .current_limit
        .as_ref()
        .map(|l| (l.requests_per_unit, Unit::try_from(l.unit).unwrap()))
}

/// The envoyproxy/ratelimit README examples (`tests/fixtures/envoy-readme`), over gRPC.
pub async fn envoy_readme(server: &TestServer, clock: &ManualClock) {
    let rls = server.grpc_client().await;
    let ask = |r| {
        let mut rls = rls.clone();
        async move { rls.should_rate_limit(r).await.unwrap().into_inner() }
    };

    // Example 1: an exact value match, 500 per second; another value matches nothing.
    let r = ask(request(
        "mongo_cps",
        vec![descriptor(&[("database", "users")])],
    ))
    .await;
    assert_eq!(r.overall_code, Code::Ok as i32);
    let s = &r.statuses[0];
    assert_eq!(limit(s), Some((500, Unit::Second)));
    assert_eq!(s.limit_remaining, 499);
    assert_eq!(s.duration_until_reset.unwrap().seconds, 1);
    let r = ask(request(
        "mongo_cps",
        vec![descriptor(&[("database", "other")])],
    ))
    .await;
    assert_eq!(codes(&r), [Code::Ok]);
    assert_eq!(r.statuses[0].current_limit, None);

    // Example 2: 5 marketing messages a day per number, 100 messages a day per number.
    let both = |n: &str| {
        request(
            "messaging",
            vec![
                descriptor(&[("message_type", "marketing"), ("to_number", n)]),
                descriptor(&[("to_number", n)]),
            ],
        )
    };
    for i in 0..5u32 {
        let r = ask(both("2061111111")).await;
        assert_eq!(codes(&r), [Code::Ok, Code::Ok], "message {i}");
        assert_eq!(r.statuses[0].limit_remaining, 4 - i);
    }
    let r = ask(both("2061111111")).await;
    assert_eq!(r.overall_code, Code::OverLimit as i32);
    assert_eq!(codes(&r), [Code::OverLimit, Code::Ok]);
    assert_eq!(limit(&r.statuses[0]), Some((5, Unit::Day)));
    assert_eq!(limit(&r.statuses[1]), Some((100, Unit::Day)));
    assert_eq!(
        r.statuses[1].limit_remaining, 94,
        "the other descriptor still counted"
    );
    let r = ask(both("2062222222")).await;
    assert_eq!(
        codes(&r),
        [Code::Ok, Code::Ok],
        "each number has its own limit"
    );

    // Example 3: 10 per second per IP; the most specific match blocks 50.0.0.5.
    for _ in 0..10 {
        let r = ask(request(
            "edge_proxy_per_ip",
            vec![descriptor(&[("remote_address", "50.0.0.1")])],
        ))
        .await;
        assert_eq!(codes(&r), [Code::Ok]);
    }
    let r = ask(request(
        "edge_proxy_per_ip",
        vec![descriptor(&[("remote_address", "50.0.0.1")])],
    ))
    .await;
    assert_eq!(codes(&r), [Code::OverLimit]);
    let r = ask(request(
        "edge_proxy_per_ip",
        vec![descriptor(&[("remote_address", "50.0.0.5")])],
    ))
    .await;
    assert_eq!(codes(&r), [Code::OverLimit], "black-listed");
    assert_eq!(limit(&r.statuses[0]), Some((0, Unit::Second)));

    // Example 4: a match needs the request's depth.
    let r = ask(request("example4", vec![descriptor(&[("key", "value")])])).await;
    assert_eq!(r.statuses[0].current_limit, None);
    let r = ask(request(
        "example4",
        vec![descriptor(&[("key", "value"), ("subkey", "subvalue")])],
    ))
    .await;
    assert_eq!(limit(&r.statuses[0]), Some((300, Unit::Second)));

    // Example 5: unlimited is OK with the largest remaining; azure is 100 per minute.
    let r = ask(request(
        "internal",
        vec![descriptor(&[("ldap", "x")]), descriptor(&[("azure", "x")])],
    ))
    .await;
    assert_eq!(codes(&r), [Code::Ok, Code::Ok]);
    assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
    assert_eq!(r.statuses[0].current_limit, None);
    assert_eq!(limit(&r.statuses[1]), Some((100, Unit::Minute)));

    // Example 6: user-a is in shadow mode (never limited), user-b is limited at 20.
    let user = |u: &str| {
        request(
            "example6",
            vec![descriptor(&[("service", "auth-service"), ("user", u)])],
        )
    };
    for _ in 0..15 {
        assert_eq!(ask(user("user-a")).await.overall_code, Code::Ok as i32);
    }
    for _ in 0..20 {
        assert_eq!(ask(user("user-b")).await.overall_code, Code::Ok as i32);
    }
    assert_eq!(
        ask(user("user-b")).await.overall_code,
        Code::OverLimit as i32
    );

    // Example 7: `replaces` drops specific_limit when both rules match.
    let k1 = descriptor(&[("key_1", "value_1"), ("user", "bkthomps")]);
    let k2 = descriptor(&[("key_2", "value_2"), ("user", "bkthomps")]);
    let r = ask(request("example7", vec![k1.clone(), k2.clone()])).await;
    assert_eq!(r.statuses[0].current_limit, None, "replaced");
    assert_eq!(limit(&r.statuses[1]), Some((10, Unit::Second)));
    let r = ask(request("example7", vec![k1])).await;
    assert_eq!(
        limit(&r.statuses[0]),
        Some((5, Unit::Second)),
        "alone it applies"
    );

    // Example 8: detailed_metric changes no limit.
    let r = ask(request(
        "example8",
        vec![
            descriptor(&[("key1", "other")]),
            descriptor(&[("key1", "value1")]),
        ],
    ))
    .await;
    assert_eq!(limit(&r.statuses[0]), Some((10, Unit::Minute)));
    assert_eq!(limit(&r.statuses[1]), Some((20, Unit::Minute)));

    // Example 9: `value*` matches by prefix, each value with its own count.
    for value in ["value_1", "value_2"] {
        let r = ask(request("example9", vec![descriptor(&[("key1", value)])])).await;
        assert_eq!(limit(&r.statuses[0]), Some((20, Unit::Minute)));
        assert_eq!(r.statuses[0].limit_remaining, 19, "{value}");
    }
    let r = ask(request("example9", vec![descriptor(&[("key1", "other")])])).await;
    assert_eq!(r.statuses[0].current_limit, None);

    // A new second: example 3's IP is allowed again.
    clock.advance(Duration::from_secs(1));
    let r = ask(request(
        "edge_proxy_per_ip",
        vec![descriptor(&[("remote_address", "50.0.0.1")])],
    ))
    .await;
    assert_eq!(codes(&r), [Code::Ok]);
}

/// `/v1/check`: decisions, the IETF headers, 429 with `Retry-After`, `hits`, no rule.
pub async fn http_check(server: &TestServer, clock: &ManualClock) {
    let body = check_body(
        "messaging",
        &[("message_type", "marketing"), ("to_number", "42")],
    );
    for i in 0..5u64 {
        let a = server.post("/v1/check", &body).await;
        assert_eq!(a.status, 200, "{}", a.body);
        let v: Value = serde_json::from_str(&a.body).unwrap();
        assert_eq!(v["overall_code"], "OK");
        assert_eq!(v["descriptors"][0]["remaining"], 4 - i);
        assert_eq!(
            v["descriptors"][0]["rule"],
            "messaging.message_type_marketing.to_number"
        );
    }
    let a = server.post("/v1/check", &body).await;
    assert_eq!(a.status, 429);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(
        v,
        json!({
            "overall_code": "OVER_LIMIT",
            "descriptors": [{
                "code": "OVER_LIMIT",
                "rule": "messaging.message_type_marketing.to_number",
                "limit": 5,
                "remaining": 0,
                "reset_after_ms": 86_400_000,
                "retry_after_ms": 86_400_000,
            }]
        })
    );
    let policy = "\"messaging.message_type_marketing.to_number\";q=5;w=86400";
    assert_eq!(a.header("ratelimit-policy"), Some(policy));
    assert_eq!(
        a.header("ratelimit"),
        Some("\"messaging.message_type_marketing.to_number\";r=0;t=86400")
    );
    assert_eq!(a.header("retry-after"), Some("86400"));

    // A day later the number may receive marketing again.
    clock.advance(Duration::from_secs(86_400));
    assert_eq!(server.post("/v1/check", &body).await.status, 200);

    // hits: several units at once; no rule: OK without headers.
    let heavy = json!({"domain": "internal", "hits": 30,
        "descriptors": [{"entries": [{"key": "azure", "value": "x"}]}]});
    let a = server.post("/v1/check", &heavy.to_string()).await;
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert_eq!(v["descriptors"][0]["remaining"], 70);
    let none = server
        .post("/v1/check", &check_body("internal", &[("nothing", "x")]))
        .await;
    assert_eq!(none.status, 200);
    assert_eq!(none.header("ratelimit"), None);
    assert_eq!(
        serde_json::from_str::<Value>(&none.body).unwrap(),
        json!({"overall_code": "OK", "descriptors": [{"code": "OK", "rule": null}]})
    );
}
