//! A memory store full of limited keys, through `weir proxy` and through `weir serve`'s
//! engine: the one decide path answers alike in both modes. A rule that fails closed
//! refuses its new keys (the engine's error says the store is full; the proxy answers 503,
//! with the layer's generic one-second `Retry-After` and without the internal reason), one
//! that fails open lets them through, and nothing goes unlimited by accident. (Before the
//! proxy decided on the engine, it had a decide path of its own.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{backend, client, get, proxy, settings, upstream};
use weir_config::Descriptor;
use weir_engine::{DecideError, StoreSpec};
use weir_listen::{App, Settings};

/// One path per request, each path limited to one request an hour: a flood of new paths
/// fills the store with limited keys. `open` picks the rule's failure policy.
fn rules(policy: &str) -> &'static str {
    let yaml = format!(
        "
domain: proxy
descriptors:
  - key: class
    value: reader
    descriptors:
      - key: path
        rule: {{algorithm: fixed_window, limit: 1, window: 1h, on_failure: {policy}}}
"
    );
    Box::leak(yaml.into_boxed_str())
}

/// The proxy, with a memory store of 64 keys: the first refusal of the flood.
async fn proxy_flood(policy: &str) -> Option<(u16, String)> {
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), rules(policy));
    s.server.engine.store = StoreSpec::Memory { capacity: 64 };
    let p = proxy(s).await;
    let http = client();
    for i in 0..300 {
        let a = get(&http, p.addr, &format!("/page/{i}"), &[]).await;
        if a.status != 200 {
            return Some((a.status, a.body));
        }
    }
    None
}

/// The server engine on the same rules and store, each request one new path: the first
/// refusal of the flood, per descriptor (Envoy's mode) and all-or-nothing (the proxy's).
async fn engine_flood(policy: &str) -> (Option<DecideError>, Option<DecideError>) {
    let mut s = Settings::default();
    s.engine.rules = weir_engine::RuleSource::Inline {
        name: "proxy.yaml",
        yaml: rules(policy),
    };
    s.engine.store = StoreSpec::Memory { capacity: 64 };
    let app = App::new(s).await.unwrap();
    let engine = app.engine();
    let (mut each, mut all) = (None, None);
    for i in 0..300 {
        let path = format!("/page/{i}");
        let d = vec![Descriptor::new([("class", "reader"), ("path", &path)])];
        if each.is_none() {
            let request = weir_engine::CheckRequest {
                domain: "proxy".into(),
                descriptors: d.clone(),
                hits_addend: 1,
            };
            each = engine.decide(&request).await.err();
        }
        let path = format!("/other/{i}");
        let d = vec![Descriptor::new([("class", "reader"), ("path", &path)])];
        if all.is_none() {
            all = engine.decide_all("proxy", &d, 1).await.err();
        }
    }
    (each, all)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_refuses_new_keys_alike_in_serve_and_proxy_when_failing_closed() {
    let (status, body) = proxy_flood("fail_closed")
        .await
        .expect("the flood filled the store");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("rate limiter unavailable"), "{body}");

    let (each, all) = engine_flood("fail_closed").await;
    for (mode, error) in [("per descriptor", each), ("all-or-nothing", all)] {
        match error {
            Some(DecideError::Unavailable(reason)) => {
                assert!(reason.contains("memory store is full"), "{mode}: {reason}")
            }
            other => panic!("{mode}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_store_lets_new_keys_through_alike_when_failing_open() {
    assert_eq!(proxy_flood("fail_open").await, None, "every request passed");
    let (each, all) = engine_flood("fail_open").await;
    assert!(each.is_none() && all.is_none(), "{each:?} {all:?}");
}
