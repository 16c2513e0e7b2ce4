//! The gRPC ceiling for `scripts/bench-server`: a tonic server answering Envoy's
//! `ShouldRateLimit` with `OK` (one `OK` status per descriptor) and deciding nothing. It
//! decodes the same request frame Weir does and encodes a response, on the same tonic 0.14
//! and envoy-types as `weir serve`, with 2 tokio workers (the machine's cores), so Weir's
//! gRPC throughput divided by this one is what deciding costs on top of gRPC itself.
//!
//! With a second argument `per-core`, the same server runs one single-threaded runtime on
//! each of two threads instead (`SO_REUSEPORT`): the ceiling on the layout `weir serve`
//! uses (`--connection-threads`).
//!
//! ```text
//! cargo run --release -p weir-server --example tonic_baseline -- 127.0.0.1:18095
//! cargo run --release -p weir-server --example tonic_baseline -- 127.0.0.1:18096 per-core
//! ```

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};

struct AlwaysOk;

#[tonic::async_trait]
impl RateLimitService for AlwaysOk {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let statuses = request
            .into_inner()
            .descriptors
            .iter()
            .map(|_| DescriptorStatus {
                code: Code::Ok.into(),
                ..DescriptorStatus::default()
            })
            .collect();
        Ok(Response::new(RateLimitResponse {
            overall_code: Code::Ok.into(),
            statuses,
            ..RateLimitResponse::default()
        }))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let addr = args
        .next()
        .unwrap_or_else(|| "127.0.0.1:18095".into())
        .parse()?;
    if args.next().as_deref() == Some("per-core") {
        eprintln!("tonic baseline (per core): ShouldRateLimit -> OK on {addr}");
        weir_testkit::per_core::serve_per_core(addr, 2, |listener| async move {
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            tonic::transport::Server::builder()
                .add_service(RateLimitServiceServer::new(AlwaysOk))
                .serve_with_incoming(incoming)
                .await
                .map_err(std::io::Error::other)
        })?;
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        eprintln!("tonic baseline: ShouldRateLimit -> OK on {addr}");
        tonic::transport::Server::builder()
            .add_service(RateLimitServiceServer::new(AlwaysOk))
            .serve(addr)
            .await
    })?;
    Ok(())
}
