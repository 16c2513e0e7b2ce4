//! `grpc.health.v1.Health` on the gRPC port, as envoyproxy/ratelimit serves it (Kubernetes
//! gRPC probes, Envoy's gRPC health checks): `SERVING` while the server is ready
//! ([`App::readiness`], the truth `/readyz` and `/healthcheck` tell too), `NOT_SERVING`
//! when it is not (a full memory store; a store down when `ready_in_fallback` is off) and
//! from the moment shutdown begins, as ratelimit after SIGTERM.
//!
//! Known service names: `""` (the whole server), `ratelimit` (ratelimit's name) and
//! `envoy.service.ratelimit.v3.RateLimitService`; any other is `NOT_FOUND`, as the health
//! protocol says. `Check` computes the status when asked (one store ping); `Watch` sends it
//! at once and then whenever it changes, looking every [`WATCH_EVERY`].

use std::pin::Pin;
use std::time::Duration;

use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_server::{Health, HealthServer};
use tonic_health::pb::{HealthCheckRequest, HealthCheckResponse};

use crate::app::App;

/// The service names the health service knows.
pub const HEALTH_SERVICES: [&str; 3] = [
    "",
    "ratelimit",
    "envoy.service.ratelimit.v3.RateLimitService",
];

/// How often a `Watch` stream looks at the status.
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(1);

/// The health service of one server.
#[derive(Debug, Clone)]
pub(crate) struct HealthService {
    app: App,
}

impl HealthService {
    /// The service of `app`, ready to add to a tonic router.
    pub(crate) fn server(app: App) -> HealthServer<HealthService> {
        HealthServer::new(HealthService { app })
    }
}

async fn status(app: &App) -> ServingStatus {
    if app.engine().readiness().await.ready {
        ServingStatus::Serving
    } else {
        ServingStatus::NotServing
    }
}

fn known(service: &str) -> Result<(), Status> {
    if HEALTH_SERVICES.contains(&service) {
        Ok(())
    } else {
        Err(Status::not_found(format!("unknown service {service:?}")))
    }
}

type WatchStream =
    Pin<Box<dyn tokio_stream::Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl Health for HealthService {
    async fn check(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        known(&request.get_ref().service)?;
        Ok(Response::new(HealthCheckResponse {
            status: status(&self.app).await.into(),
        }))
    }

    type WatchStream = WatchStream;

    async fn watch(
        &self,
        request: Request<HealthCheckRequest>,
    ) -> Result<Response<Self::WatchStream>, Status> {
        known(&request.get_ref().service)?;
        let (tx, rx) = tokio::sync::mpsc::channel(1);
        let app = self.app.clone();
        tokio::spawn(async move {
            let mut last = None;
            let mut tick = tokio::time::interval(WATCH_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    () = tx.closed() => return,
                }
                let now = status(&app).await;
                if last != Some(now) {
                    last = Some(now);
                    let sent = tx
                        .send(Ok(HealthCheckResponse { status: now.into() }))
                        .await;
                    if sent.is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }
}
