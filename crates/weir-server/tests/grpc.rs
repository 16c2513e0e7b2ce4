//! `ShouldRateLimit` over a real gRPC connection (tonic client), with the examples of
//! envoyproxy/ratelimit's README as scenarios: the config directory is loaded unchanged
//! and each answer is what that service gives. Time moves only by `ManualClock::advance`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, descriptor, envoy_readme_dir, request, scenarios, settings, TestServer};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::google::protobuf::UInt64Value;
use tonic::Code as GrpcCode;
use weir_server::{HeaderStyle, LegacyHeaders, ResponseHeaders};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_readme_examples_answer_as_envoyproxy_ratelimit_does() {
    bounded(async {
        let (settings, clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        scenarios::envoy_readme(&server, &clock).await;
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hits_addend_unknown_domains_and_bad_requests() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        let mut rls = server.grpc_client().await;

        // hits_addend on the request, and per descriptor (which wins).
        let mut r = request("mongo_cps", vec![descriptor(&[("database", "default")])]);
        r.hits_addend = 100;
        let answer = rls.should_rate_limit(r.clone()).await.unwrap().into_inner();
        assert_eq!(answer.statuses[0].limit_remaining, 400);
        r.descriptors[0].hits_addend = Some(UInt64Value { value: 7 });
        let answer = rls.should_rate_limit(r).await.unwrap().into_inner();
        assert_eq!(answer.statuses[0].limit_remaining, 393);

        // More hits than the limit can ever allow: over the limit.
        let mut r = request("mongo_cps", vec![descriptor(&[("database", "users")])]);
        r.hits_addend = 501;
        let answer = rls.should_rate_limit(r).await.unwrap().into_inner();
        assert_eq!(answer.overall_code, Code::OverLimit as i32);

        // An unknown domain: nothing applies (as envoyproxy/ratelimit).
        let answer = rls
            .should_rate_limit(request("nope", vec![descriptor(&[("a", "b")])]))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(answer.overall_code, Code::Ok as i32);
        assert_eq!(answer.statuses.len(), 1);

        // Invalid requests: INVALID_ARGUMENT with a message that says what was wrong.
        let cases = [
            (
                request("", vec![descriptor(&[("a", "b")])]),
                "rate limit domain must not be empty",
            ),
            (
                request("mongo_cps", vec![]),
                "rate limit descriptor list must not be empty",
            ),
            (
                request(
                    "mongo_cps",
                    (0..65).map(|_| descriptor(&[("a", "b")])).collect(),
                ),
                "65 descriptors, above the maximum of 64",
            ),
            (
                request(
                    "mongo_cps",
                    vec![descriptor(&[("database", &"x".repeat(2000))])],
                ),
                "descriptors[0].entries[0]: value is 2000 bytes, above the maximum of 1024",
            ),
        ];
        for (r, message) in cases {
            let status = rls.should_rate_limit(r).await.unwrap_err();
            assert_eq!(status.code(), GrpcCode::InvalidArgument);
            assert_eq!(status.message(), message);
        }

        // A message above the size limit is refused, not read.
        let huge = request(
            "mongo_cps",
            vec![descriptor(&[("database", &"x".repeat(70_000))])],
        );
        let status = rls.should_rate_limit(huge).await.unwrap_err();
        assert_eq!(status.code(), GrpcCode::OutOfRange, "{status:?}");
        drop(rls);
        server.stop().await.unwrap();
    })
    .await;
}

/// Envoy is asked to add no header unless configured, as envoyproxy/ratelimit (whose
/// `LIMIT_RESPONSE_HEADERS_ENABLED` is off by default): a header would show rule ids to
/// end clients. Issue 15.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn envoy_gets_no_response_header_unless_configured() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        assert_eq!(headers_for(settings).await, []);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_headers_are_ratelimits_three_or_the_ietf_draft_and_x_ratelimit() {
    bounded(async {
        let expect = |k: &str, v: &str| (k.to_string(), v.to_string());
        let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
        settings.envoy_headers = ResponseHeaders {
            legacy: Some(LegacyHeaders::default()),
            ..ResponseHeaders::NONE
        };
        assert_eq!(
            headers_for(settings).await,
            [
                expect("RateLimit-Limit", "100"),
                expect("RateLimit-Remaining", "99"),
                expect("RateLimit-Reset", "60"),
            ]
        );
        let (mut settings, _clock) = common::settings(Some(&envoy_readme_dir()));
        settings.envoy_headers = ResponseHeaders {
            style: HeaderStyle {
                ietf: true,
                x_ratelimit: true,
            },
            legacy: None,
        };
        assert_eq!(
            headers_for(settings).await,
            [
                expect("ratelimit-policy", "\"internal.azure\";q=100;w=60"),
                expect("ratelimit", "\"internal.azure\";r=99;t=60"),
                expect("x-ratelimit-limit", "100, 100;w=60"),
                expect("x-ratelimit-remaining", "99"),
                expect("x-ratelimit-reset", "60"),
            ]
        );
    })
    .await;
}

/// The headers Envoy is asked to add to the answer of one request to a server with
/// `settings`.
async fn headers_for(settings: weir_server::Settings) -> Vec<(String, String)> {
    let server = TestServer::start(settings).await;
    let mut rls = server.grpc_client().await;
    let answer = rls
        .should_rate_limit(request("internal", vec![descriptor(&[("azure", "x")])]))
        .await
        .unwrap()
        .into_inner();
    drop(rls);
    server.stop().await.unwrap();
    answer
        .response_headers_to_add
        .iter()
        .map(|h| (h.key.clone(), h.value.clone()))
        .collect()
}

/// Sends raw bytes as the request message, whatever they are.
#[derive(Debug, Clone, Default)]
struct RawCodec;

#[derive(Debug)]
struct RawEncoder;

#[derive(Debug)]
struct RawDecoder;

impl tonic::codec::Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(
        &mut self,
        item: Vec<u8>,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        bytes::BufMut::put_slice(dst, &item);
        Ok(())
    }
}

impl tonic::codec::Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<Vec<u8>>, tonic::Status> {
        use bytes::Buf as _;
        let mut out = vec![0; src.remaining()];
        src.copy_to_slice(&mut out);
        Ok(Some(out))
    }
}

impl tonic::codec::Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_that_is_not_protobuf_is_invalid_argument() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", server.grpc))
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut grpc = tonic::client::Grpc::new(channel);
        grpc.ready().await.unwrap();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(
            "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
        );
        let garbage = vec![
            0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ];
        let status = grpc
            .unary(tonic::Request::new(garbage), path, RawCodec)
            .await
            .unwrap_err();
        assert_eq!(status.code(), GrpcCode::InvalidArgument, "{status:?}");
        assert!(
            status
                .message()
                .starts_with("failed to decode Protobuf message"),
            "{status:?}"
        );
        server.stop().await.unwrap();
    })
    .await;
}
