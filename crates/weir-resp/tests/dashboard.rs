//! RESP traffic shows on the dashboard: `CL.THROTTLE` and `THROTTLE` decide through
//! `Engine::check_rule` under their own rule names (`cl.throttle`, `throttle`, domain
//! `resp`), which are in no rule file; the dashboard's per-second history draws them beside
//! the rule files' rules (`WEIR.CHECK` counts under the matched rule, as `/v1/check`). Over
//! sockets: `weir serve`'s HTTP API (with an admin token) and the RESP listener on one
//! engine, as `weir serve --resp` runs them, under a manual clock.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::app::serve_resp;
use common::{ints, PATIENCE, START_NS};
use serde_json::Value;
use tokio::net::TcpListener;
use weir_core::ManualClock;
use weir_listen::AdminToken;
use weir_server::{App, RuleSource, SharedClock};

const TOKEN: &str = "dashboard-token-for-resp-tests";

/// The rule's series in the history: its last second of `field`.
fn last_second(data: &Value, rule: &str, field: &str) -> u64 {
    let series = data["history"]["series"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["rule"] == rule)
        .unwrap_or_else(|| panic!("no series for {rule}: {data}"));
    assert_eq!(series["domain"], "resp", "{series}");
    series[field]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .as_u64()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cl_throttle_and_throttle_are_drawn_on_the_dashboard() {
    let clock = ManualClock::new(START_NS);
    let mut settings = weir_server::Settings::default();
    settings.engine.rules = RuleSource::Example;
    settings.engine.clock = SharedClock::new(clock.clone());
    settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
    let app = App::new(settings).await.unwrap();
    let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let http_addr = http.local_addr().unwrap().to_string();
    let (stop_http, http_stopped) = tokio::sync::oneshot::channel::<()>();
    let http_task = tokio::spawn(weir_server::serve(app.clone(), http, grpc, async move {
        let _ = http_stopped.await;
    }));
    let (resp_addr, stop_resp, resp_task) = serve_resp(&app).await;
    let client = redis::Client::open(format!("redis://{resp_addr}/")).unwrap();
    let mut con = client.get_multiplexed_async_connection().await.unwrap();
    let data = || async {
        let answer = weir_server::client::send(
            &http_addr,
            "GET",
            "/dashboard/data",
            None,
            Some(TOKEN),
            PATIENCE,
        )
        .await
        .unwrap();
        assert_eq!(answer.status, 200, "{}", answer.body);
        serde_json::from_str::<Value>(&answer.body).unwrap()
    };

    // Burst 1: two allowed, then limited.
    for expected in [0, 0, 1] {
        let got = ints(&mut con, &["CL.THROTTLE", "u1", "1", "1", "60", "1"]).await;
        assert_eq!(got[0], expected, "{got:?}");
    }
    for expected in [1, 0] {
        let got = ints(&mut con, &["THROTTLE", "u2", "1", "1", "60"]).await;
        assert_eq!(got[0], expected, "{got:?}");
    }
    let now = data().await;
    assert_eq!(last_second(&now, "cl.throttle", "allowed"), 2);
    assert_eq!(last_second(&now, "cl.throttle", "denied"), 1);
    assert_eq!(last_second(&now, "throttle", "allowed"), 1);
    assert_eq!(last_second(&now, "throttle", "denied"), 1);

    // A second later, a new denial lands in the last second, not on top of the old ones.
    clock.advance(Duration::from_secs(1));
    let _ = data().await;
    let got = ints(&mut con, &["THROTTLE", "u2", "1", "1", "60"]).await;
    assert_eq!(got[0], 0, "{got:?}");
    let later = data().await;
    assert_eq!(last_second(&later, "throttle", "denied"), 1);
    assert_eq!(last_second(&later, "cl.throttle", "denied"), 0);

    let _ = stop_resp.send(());
    let _ = stop_http.send(());
    tokio::time::timeout(PATIENCE, resp_task)
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(PATIENCE, http_task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
