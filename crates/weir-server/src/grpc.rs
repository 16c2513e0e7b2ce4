//! Envoy's `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` over tonic: what
//! Envoy's global rate limit filter calls. Converts the request (`rls.rs`), decides
//! (`decide.rs`), converts the verdict back. Bad input is `INVALID_ARGUMENT` with a message
//! that says what was wrong (a message that is not protobuf too, which tonic alone would
//! answer `INTERNAL`); a store failure no policy covered is `UNAVAILABLE`.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::{
    RateLimitService, RateLimitServiceServer,
};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::{Request, Response, Status};
use weir_core::Clock as _;

use crate::app::App;
use crate::headers::{REASON_HEADER, STORE_UNAVAILABLE};
use crate::rls;
use weir_engine::Code;
use weir_engine::DecideError;

/// The gRPC service (one per server; cheap to clone).
#[derive(Debug, Clone)]
pub struct RlsService {
    app: App,
}

impl RlsService {
    /// The service of `app`, ready to add to a tonic server, with the message size limit.
    pub fn server(app: App) -> RateLimitServiceServer<RlsService> {
        let limit = app.settings().max_body_bytes;
        RateLimitServiceServer::new(RlsService { app }).max_decoding_message_size(limit)
    }
}

/// Tonic answers a request body that does not decode as protobuf with `INTERNAL` ("failed
/// to decode Protobuf message: …", gRPC's convention for unparseable input); Weir answers
/// `INVALID_ARGUMENT` for every malformed request, keeping tonic's message. Applied to
/// every gRPC response by `serve.rs`.
pub fn malformed_is_invalid_argument<B>(
    mut response: axum::http::Response<B>,
) -> axum::http::Response<B> {
    let headers = response.headers();
    let internal = headers.get("grpc-status").is_some_and(|s| s == "13");
    let undecodable = headers.get("grpc-message").is_some_and(|m| {
        let m = m.as_bytes();
        m.starts_with(b"failed to decode Protobuf")
            || m.starts_with(b"failed%20to%20decode%20Protobuf")
    });
    if internal && undecodable {
        response
            .headers_mut()
            .insert("grpc-status", axum::http::HeaderValue::from_static("3"));
    }
    response
}

fn grpc_error(error: DecideError) -> Status {
    match error {
        DecideError::Invalid(message) => Status::invalid_argument(message),
        DecideError::Unavailable(_) => Status::unavailable(error.to_string()),
        DecideError::Rule { .. } => Status::failed_precondition(error.to_string()),
    }
}

#[tonic::async_trait]
impl RateLimitService for RlsService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let metrics = self.app.engine().metrics();
        let clock = self.app.engine().limiter().clock();
        let start_ns = clock.now_ns();
        let decided = match rls::check_request(request.into_inner()) {
            Ok(check) => self.app.engine().decide(&check).await,
            Err(error) => Err(error),
        };
        let took_ns = clock.now_ns().saturating_sub(start_ns);
        metrics.request_duration("grpc", std::time::Duration::from_nanos(took_ns));
        match decided {
            Ok(verdict) => {
                metrics.request(
                    "grpc",
                    match verdict.overall {
                        Code::Ok => "ok",
                        Code::OverLimit => "over_limit",
                    },
                );
                let mut response =
                    Response::new(rls::response(&verdict, &self.app.settings().envoy_headers));
                // Envoy's protocol has no field for it: response metadata says a denial
                // is an outage's (fail closed), not a limit's.
                if verdict.overall == Code::OverLimit && verdict.failed_closed() {
                    response.metadata_mut().insert(
                        REASON_HEADER,
                        tonic::metadata::MetadataValue::from_static(STORE_UNAVAILABLE),
                    );
                }
                Ok(response)
            }
            Err(error) => {
                metrics.request(
                    "grpc",
                    if matches!(error, DecideError::Invalid(_) | DecideError::Rule { .. }) {
                        "invalid"
                    } else {
                        "error"
                    },
                );
                Err(grpc_error(error))
            }
        }
    }
}
