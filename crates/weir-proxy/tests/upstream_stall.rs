//! An upstream that sends its response head and then stalls does not hold the client for
//! ever (review finding 5): after the upstream body's idle timeout the client's response
//! is cut (the connection closes before the body ends) and a WARN names the upstream.
//! Real sockets: the proxy, a recording backend that stalls mid-body, hyper's client.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::logs::Logs;
use common::{client, proxy, settings, stalling_backend, upstream};
use http_body_util::{BodyExt as _, Full};
use tracing::Level;

#[tokio::test]
async fn an_upstream_that_stalls_mid_body_has_the_clients_response_cut_and_named() {
    let (logs, _guard) = Logs::capture();
    let b = stalling_backend("first part").await;
    let mut s = settings(upstream(&b), "domain: proxy\n");
    s.upstream_body_timeout = Duration::from_millis(200);
    let p = proxy(s).await;
    let request = http::Request::get(format!("http://{}/big", p.addr))
        .body(Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = client().request(request).await.unwrap();
    assert_eq!(response.status(), 200, "the head came through");
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(first, "first part");
    // The rest never comes: the proxy must end the response, as an error (a cut
    // connection), never as a complete-looking body.
    let rest = tokio::time::timeout(Duration::from_secs(10), body.frame())
        .await
        .expect("the proxy cut the response within 10 s");
    assert!(
        matches!(rest, Some(Err(_))),
        "cut, not ended cleanly: {rest:?}"
    );
    let warnings = logs.at(Level::WARN);
    let upstream = format!("http://{}", b.addr);
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("upstream stalled mid-response") && w.contains(&upstream)),
        "{warnings:#?}"
    );
}
