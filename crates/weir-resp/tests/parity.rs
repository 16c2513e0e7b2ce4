//! `WEIR.CHECK` gives the verdict `POST /v1/check` gives. Two `weir serve` engines (the
//! `weir-server` library, each with its own memory store and `ManualClock`, moved in step)
//! run the example rules; one is asked over HTTP, the other over RESP through the very
//! wiring `weir serve --resp` uses (its limiter and its rule book behind two small
//! wrappers). Every field of every answer must agree, request after request: GCRA,
//! sliding windows, a token bucket with a cost, `replaces`, a lockout, a shadow rule, an
//! `enforce_percent` roll-out, unlimited, unmatched, unknown domain, hits above capacity,
//! and the concurrency rule's refusal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::app::{app, serve_resp};
use redis::Value;
use tokio::net::TcpListener;
use weir_core::ManualClock;

/// `/v1/check`'s answer as flat fields (booleans as 1, a missing rule as nil).
fn http_fields(body: &str) -> BTreeMap<String, String> {
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    if let Some(error) = json.get("error") {
        return BTreeMap::from([("error".to_string(), error.as_str().unwrap().to_string())]);
    }
    let mut out = BTreeMap::from([(
        "overall_code".to_string(),
        json["overall_code"].as_str().unwrap().to_string(),
    )]);
    for (k, v) in json["descriptors"][0].as_object().unwrap() {
        let v = match v {
            serde_json::Value::Bool(b) => u8::from(*b).to_string(),
            serde_json::Value::Null => "nil".to_string(),
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.insert(k.clone(), v);
    }
    out
}

fn resp_fields(reply: redis::RedisResult<Value>) -> BTreeMap<String, String> {
    let text = |v: &Value| match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).unwrap(),
        Value::Int(n) => n.to_string(),
        Value::Nil => "nil".into(),
        other => panic!("unexpected {other:?}"),
    };
    match reply {
        Ok(Value::Map(pairs)) => pairs.iter().map(|(k, v)| (text(k), text(v))).collect(),
        Ok(other) => panic!("not a map: {other:?}"),
        Err(e) => {
            // "ERR <message>": the message is /v1/check's error.
            let message = e.detail().unwrap_or_default().to_string();
            BTreeMap::from([("error".to_string(), message)])
        }
    }
}

/// (domain, entries, hits, how many times).
type Request = (&'static str, Vec<(&'static str, String)>, u64, usize);

#[tokio::test]
async fn weir_check_answers_what_v1_check_answers() {
    let (http_clock, resp_clock) = (
        ManualClock::new(common::START_NS),
        ManualClock::new(common::START_NS),
    );
    let http_app = app(&http_clock, None).await;
    let resp_app = app(&resp_clock, None).await;

    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http_task = tokio::spawn(weir_server::serve(http_app, http, grpc, async move {
        let _ = http_stopped.await;
    }));

    let (resp_addr, stop_resp, resp_task) = serve_resp(&resp_app).await;
    let client = redis::Client::open(format!("redis://{resp_addr}/?protocol=resp3")).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();

    let mut requests: Vec<Request> = vec![
        ("api", vec![("remote_address", "10.0.0.1".into())], 1, 45),
        ("api", vec![("remote_address", "10.0.0.2".into())], 41, 1),
        ("api", vec![("user_id", "alice".into())], 1, 3),
        (
            "api",
            vec![("user_id", "alice".into()), ("path", "/v1/export/x".into())],
            1,
            12,
        ),
        (
            "api",
            vec![("plan", "enterprise".into()), ("user_id", "bob".into())],
            2,
            3,
        ),
        ("api", vec![("login_failures", "carol".into())], 1, 7),
        ("api", vec![("search_user", "dave".into())], 1, 62),
        ("api", vec![("path", "/healthz".into())], 1, 2),
        ("api", vec![("nobody", "x".into())], 1, 1),
        ("other", vec![("user_id", "x".into())], 1, 1),
        ("api", vec![("report_tenant", "t".into())], 1, 1),
    ];
    for k in 0..6 {
        requests.push(("api", vec![("api_key", format!("key-{k}"))], 1, 55));
    }
    let mut codes: BTreeMap<String, usize> = BTreeMap::new();
    for round in 0..2 {
        for (domain, entries, hits, times) in &requests {
            for i in 0..*times {
                let body = serde_json::json!({
                    "domain": domain,
                    "descriptors": [{"entries": entries.iter().map(|(k, v)| serde_json::json!({"key": k, "value": v})).collect::<Vec<_>>()}],
                    "hits": hits,
                });
                let answer = weir_server::client::send(
                    &http_addr,
                    "POST",
                    "/v1/check",
                    Some(&body.to_string()),
                    None,
                    Duration::from_secs(10),
                )
                .await
                .unwrap();
                let mut cmd = redis::cmd("WEIR.CHECK");
                cmd.arg(*domain);
                for (k, v) in entries {
                    cmd.arg(*k).arg(v);
                }
                cmd.arg("HITS").arg(*hits);
                let over_resp = resp_fields(cmd.query_async(&mut con).await);
                let code = over_resp
                    .get("code")
                    .or(over_resp.get("error"))
                    .cloned()
                    .unwrap_or_default();
                *codes
                    .entry(code.split(':').next().unwrap_or_default().to_string())
                    .or_default() += 1;
                assert_eq!(
                    http_fields(&answer.body),
                    over_resp,
                    "round {round}, {domain} {entries:?} hits {hits}, request {i}"
                );
            }
        }
        for clock in [&http_clock, &resp_clock] {
            clock.advance(Duration::from_millis(1500));
        }
    }
    // Both answers were seen many times, and the concurrency rule's refusal.
    assert!(codes["OK"] > 500 && codes["OVER_LIMIT"] > 40, "{codes:?}");
    assert_eq!(codes["rule api.report_tenant"], 2, "{codes:?}");
    let _ = stop_http.send(());
    let _ = stop_resp.send(());
    http_task.await.unwrap().unwrap();
    resp_task.await.unwrap();
}
