//! Health as envoyproxy/ratelimit serves it (issue 15): `grpc.health.v1.Health` on the gRPC
//! port, asked by tonic-health's own client over a real socket, and `/healthcheck` on the
//! HTTP port, both telling the readiness `/readyz` tells: serving while the server can
//! decide; not serving when a full memory store refuses new keys, when a store that does
//! not answer must not be covered by fallback, and once shutdown begins.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, settings, Scratch, TestServer};
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use weir_server::{StoreSpec, HEALTH_SERVICES};

async fn health_client(server: &TestServer) -> HealthClient<Channel> {
    let channel = Channel::from_shared(format!("http://{}", server.grpc))
        .unwrap()
        .connect()
        .await
        .expect("grpc connect");
    HealthClient::new(channel)
}

async fn status(client: &mut HealthClient<Channel>, service: &str) -> ServingStatus {
    let answer = client
        .check(HealthCheckRequest {
            service: service.to_string(),
        })
        .await
        .unwrap()
        .into_inner();
    ServingStatus::try_from(answer.status).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_server_is_serving_on_grpc_health_and_healthcheck() {
    bounded(async {
        let (settings, _clock) = settings(None);
        let server = TestServer::start(settings).await;
        let mut health = health_client(&server).await;
        for service in HEALTH_SERVICES {
            assert_eq!(
                status(&mut health, service).await,
                ServingStatus::Serving,
                "{service:?}"
            );
        }
        let unknown = health
            .check(HealthCheckRequest {
                service: "nope".into(),
            })
            .await
            .unwrap_err();
        assert_eq!(unknown.code(), tonic::Code::NotFound);

        // Watch sends the status at once.
        let mut watch = health
            .watch(HealthCheckRequest {
                service: "ratelimit".into(),
            })
            .await
            .unwrap()
            .into_inner();
        let first = watch.message().await.unwrap().unwrap();
        assert_eq!(first.status, i32::from(ServingStatus::Serving));

        let a = server.get("/healthcheck").await;
        assert_eq!((a.status, a.body.as_str()), (200, "OK"));

        // From the moment shutdown begins, not serving (as ratelimit after SIGTERM).
        server.app.engine().start_draining();
        assert_eq!(status(&mut health, "").await, ServingStatus::NotServing);
        let a = server.get("/healthcheck").await;
        assert_eq!((a.status, a.body.as_str()), (500, "shutting down\n"));
        assert_eq!(server.get("/readyz").await.status, 503);
        drop((health, watch));
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_memory_store_is_not_serving() {
    bounded(async {
        let dir = Scratch::new("health-full");
        let rules = dir.write(
            "rules.yaml",
            "domain: d\ndescriptors:\n  - key: strict\n    rate_limit: {unit: hour, requests_per_unit: 1}\n",
        );
        let (mut settings, _clock) = settings(Some(&rules));
        settings.engine.store = StoreSpec::Memory { capacity: 64 };
        let server = TestServer::start(settings).await;
        let mut health = health_client(&server).await;
        assert_eq!(status(&mut health, "ratelimit").await, ServingStatus::Serving);
        // Limited keys only, past the capacity: new keys are refused.
        let mut refused = false;
        for i in 0..400 {
            let body = check_body("d", &[("strict", &format!("k{i}"))]);
            if server.post("/v1/check", &body).await.status == 503 {
                refused = true;
                break;
            }
        }
        assert!(refused, "the store never filled");
        assert_eq!(
            status(&mut health, "ratelimit").await,
            ServingStatus::NotServing
        );
        let a = server.get("/healthcheck").await;
        assert_eq!(a.status, 500);
        assert!(a.body.contains("memory store is full"), "{}", a.body);
        drop(health);
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_does_not_answer_is_serving_only_while_fallback_may_decide() {
    bounded(async {
        let nobody = format!("redis://127.0.0.1:{}", weir_testkit::ports::free_port());
        for (ready_in_fallback, expected, http) in [
            (true, ServingStatus::Serving, 200),
            (false, ServingStatus::NotServing, 500),
        ] {
            let (mut settings, _clock) = settings(None);
            settings.engine.store = StoreSpec::parse(&nobody).unwrap();
            settings.engine.failover.timeout = std::time::Duration::from_millis(200);
            settings.engine.ready_in_fallback = ready_in_fallback;
            let server = TestServer::start(settings).await;
            let mut health = health_client(&server).await;
            assert_eq!(status(&mut health, "").await, expected);
            assert_eq!(server.get("/healthcheck").await.status, http);
            drop(health);
            server.stop().await.unwrap();
        }
    })
    .await;
}
