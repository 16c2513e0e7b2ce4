//! The layer in front of a tonic service, over a real gRPC connection on 127.0.0.1:0: the
//! peer address comes from tonic's `TcpConnectInfo`, and a denial reaches the tonic client
//! as `RESOURCE_EXHAUSTED` with the rate-limit headers in its metadata.

#![cfg(feature = "tonic")] // reads the peer address the way tonic records it
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Code, Request, Response, Status};
use weir_core::{Limiter, ManualClock, MemoryStore, Rule};
use weir_tower::{KeyBy, Policy, RateLimitLayer};

/// A service that always answers: whatever limits it, the layer does.
struct Always;

#[tonic::async_trait]
impl RateLimitService for Always {
    async fn should_rate_limit(
        &self,
        _request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        Ok(Response::new(RateLimitResponse::default()))
    }
}

#[tokio::test]
async fn a_tonic_client_sees_resource_exhausted_past_the_limit() {
    let limiter = Limiter::new(
        MemoryStore::default(),
        ManualClock::new(1_700_000_000_000_000_000),
    );
    let per_peer = Policy::new(
        "per_peer",
        Rule::fixed_window(2, Duration::from_secs(60)).unwrap(),
    )
    .unwrap()
    .key(KeyBy::peer_ip());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(RateLimitLayer::new(limiter, vec![per_peer]).unwrap())
            .add_service(RateLimitServiceServer::new(Always))
            .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
    );
    let mut client = RateLimitServiceClient::connect(format!("http://{addr}"))
        .await
        .unwrap();
    for remaining in ["1", "0"] {
        let ok = client
            .should_rate_limit(RateLimitRequest::default())
            .await
            .unwrap();
        let ratelimit = ok.metadata().get("ratelimit").unwrap().to_str().unwrap();
        assert!(
            ratelimit.starts_with(&format!(r#""per_peer";r={remaining};"#)),
            "{ratelimit}"
        );
    }
    let denied = client
        .should_rate_limit(RateLimitRequest::default())
        .await
        .unwrap_err();
    assert_eq!(denied.code(), Code::ResourceExhausted);
    assert_eq!(denied.message(), "rate limit exceeded");
    assert!(denied.metadata().get("retry-after").is_some());
    assert_eq!(
        denied.metadata().get("ratelimit-policy").unwrap(),
        r#""per_peer";q=2;w=60"#
    );
}
