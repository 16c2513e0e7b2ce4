//! The same gRPC and HTTP scenarios as on the memory store, against a real `memcached`
//! (a throwaway process from `weir-testkit`), deciding on the test's manual clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, envoy_readme_dir, scenarios, settings, TestServer};
use weir_server::StoreSpec;
use weir_testkit::servers::Memcached;

fn memcached_settings(memcached: &Memcached) -> (weir_server::Settings, weir_core::ManualClock) {
    let (mut settings, clock) = settings(Some(&envoy_readme_dir()));
    settings.engine.store = StoreSpec::parse(&memcached.url()).unwrap();
    (settings, clock)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_readme_examples_on_memcached() {
    let memcached = Memcached::start();
    bounded(async {
        let (settings, clock) = memcached_settings(&memcached);
        let server = TestServer::start(settings).await;
        scenarios::envoy_readme(&server, &clock).await;
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_check_on_memcached() {
    let memcached = Memcached::start();
    bounded(async {
        let (settings, clock) = memcached_settings(&memcached);
        let server = TestServer::start(settings).await;
        scenarios::http_check(&server, &clock).await;
        server.stop().await.unwrap();
    })
    .await;
}
