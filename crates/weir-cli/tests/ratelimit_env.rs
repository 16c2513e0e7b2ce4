//! Issue 15's "done when": the built `weir` binary started with **only** envoyproxy/
//! ratelimit's environment variables (a Redis on loopback from weir-testkit, a runtime
//! directory of ratelimit's example configs, ratelimit's listener variables) answers
//! `ShouldRateLimit` on Redis and the gRPC health check, serves `/healthcheck`, warns about
//! the variable it cannot honour, and stops on SIGTERM; and ratelimit's gRPC TLS variables
//! (`GRPC_SERVER_USE_TLS` …) serve mutual TLS that refuses a client without a certificate.
//! Every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::path::Path;
use std::time::Duration;

use common::env_only::{request, Weir};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use weir_testkit::ports::free_port;
use weir_testkit::servers::RedisServer;

fn runtime_root() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/ratelimit-runtime")
        .display()
        .to_string()
}

#[test]
fn ratelimits_grpc_tls_variables_serve_mutual_tls() {
    use tonic::transport::{Certificate, ClientTlsConfig, Identity};

    let dir = std::env::temp_dir().join(format!("weir-cli-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    common::tls_files(&dir, "localhost");
    let file = |name: &str| dir.join(name).display().to_string();
    let grpc_port = free_port();
    let mut weir = Weir::start(&[
        ("LOG_FORMAT", "json".into()),
        ("LOG_LEVEL", "info".into()),
        ("RUNTIME_ROOT", runtime_root()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".into()),
        ("HOST", "127.0.0.1".into()),
        ("PORT", free_port().to_string()),
        ("GRPC_HOST", "127.0.0.1".into()),
        ("GRPC_PORT", grpc_port.to_string()),
        ("GRPC_SERVER_USE_TLS", "true".into()),
        ("GRPC_SERVER_TLS_CERT", file("server.pem")),
        ("GRPC_SERVER_TLS_KEY", file("server.key")),
        ("GRPC_CLIENT_TLS_CACERT", file("ca.pem")),
        ("LIMIT_RESPONSE_HEADERS_ENABLED", "true".into()),
        ("LIMIT_REMAINING_HEADER", "X-Left".into()),
    ]);
    let listening = weir.wait_for("weir serve: listening");
    assert!(listening.contains("\"grpc_tls\":true"), "{listening}");

    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let ask = |identity: bool| {
                let mut tls = ClientTlsConfig::new()
                    .ca_certificate(Certificate::from_pem(read("ca.pem")))
                    .domain_name("localhost");
                if identity {
                    tls = tls.identity(Identity::from_pem(read("client.pem"), read("client.key")));
                }
                async move {
                    let channel = Channel::from_shared(format!("https://127.0.0.1:{grpc_port}"))
                        .unwrap()
                        .tls_config(tls)
                        .unwrap()
                        .connect()
                        .await
                        .map_err(|e| e.to_string())?;
                    RateLimitServiceClient::new(channel)
                        .should_rate_limit(request("mongo_cps", &[("database", "users")]))
                        .await
                        .map(|a| {
                            let a = a.into_inner();
                            let headers: Vec<String> = a
                                .response_headers_to_add
                                .iter()
                                .map(|h| format!("{}: {}", h.key, h.value))
                                .collect();
                            (a.overall_code, headers)
                        })
                        .map_err(|e| e.to_string())
                }
            };
            // LIMIT_RESPONSE_HEADERS_ENABLED, with one header renamed.
            let headers = ["RateLimit-Limit: 500", "X-Left: 499", "RateLimit-Reset: 1"]
                .map(String::from)
                .to_vec();
            assert_eq!(ask(true).await, Ok((Code::Ok as i32, headers)));
            assert!(
                ask(false).await.is_err(),
                "a client without a certificate got in"
            );
        });
    assert!(weir.terminate().success());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn weir_serve_runs_on_ratelimits_environment_alone() {
    let redis = RedisServer::start();
    let (http_port, grpc_port, debug_port) = (free_port(), free_port(), free_port());
    // The environment of ratelimit's own docker-compose example, and nothing else.
    let mut weir = Weir::start(&[
        ("USE_STATSD", "false".into()),
        ("LOG_LEVEL", "debug".into()),
        ("LOG_FORMAT", "json".into()),
        ("REDIS_SOCKET_TYPE", "tcp".into()),
        ("REDIS_URL", format!("127.0.0.1:{}", redis.port())),
        ("RUNTIME_ROOT", runtime_root()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".into()),
        ("RUNTIME_WATCH_ROOT", "false".into()),
        ("HOST", "127.0.0.1".into()),
        ("PORT", http_port.to_string()),
        ("GRPC_HOST", "127.0.0.1".into()),
        ("GRPC_PORT", grpc_port.to_string()),
        ("DEBUG_HOST", "127.0.0.1".into()),
        ("DEBUG_PORT", debug_port.to_string()),
        ("TRACING_ENABLED", "true".into()),
        ("CACHE_KEY_PREFIX", "rl_".into()),
        ("REDIS_PIPELINE_WINDOW", "200us".into()),
    ]);
    let listening = weir.wait_for("weir serve: listening");
    let event: serde_json::Value = serde_json::from_str(&listening).unwrap();
    assert_eq!(event["fields"]["grpc"], format!("127.0.0.1:{grpc_port}"));
    assert_eq!(event["fields"]["http"], format!("127.0.0.1:{http_port}"));
    assert_eq!(
        event["fields"]["store"],
        format!("redis://127.0.0.1:{}", redis.port())
    );
    let warning = weir.wait_for("TRACING_ENABLED is not honoured");
    assert!(warning.contains("\"level\":\"WARN\""), "{warning}");

    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let channel = Channel::from_shared(format!("http://127.0.0.1:{grpc_port}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut health = HealthClient::new(channel.clone());
            for service in ["", "ratelimit"] {
                let answer = health
                    .check(HealthCheckRequest {
                        service: service.into(),
                    })
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(
                    answer.status,
                    i32::from(ServingStatus::Serving),
                    "{service:?}"
                );
            }

            // example.yaml (the shape of ratelimit's main example): 4 a minute for category=account.
            let mut rls = RateLimitServiceClient::new(channel);
            let account = request("rl", &[("category", "account")]);
            for left in (0..4).rev() {
                let answer = rls
                    .should_rate_limit(account.clone())
                    .await
                    .unwrap()
                    .into_inner();
                assert_eq!(answer.overall_code, Code::Ok as i32);
                assert_eq!(answer.statuses[0].limit_remaining, left);
                assert!(
                    answer.response_headers_to_add.is_empty(),
                    "no headers unless enabled"
                );
            }
            let answer = rls.should_rate_limit(account).await.unwrap().into_inner();
            assert_eq!(answer.overall_code, Code::OverLimit as i32);
            // config.yaml, and the file without an extension.
            let mongo = rls
                .should_rate_limit(request("mongo_cps", &[("database", "users")]))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(mongo.statuses[0].limit_remaining, 499);
            let edge = rls
                .should_rate_limit(request(
                    "edge_proxy_per_ip",
                    &[("remote_address", "10.0.0.1")],
                ))
                .await
                .unwrap()
                .into_inner();
            assert_eq!(edge.statuses[0].limit_remaining, 9);

            let check = weir_server::client::send(
                &format!("127.0.0.1:{http_port}"),
                "GET",
                "/healthcheck",
                None,
                None,
                Duration::from_secs(10),
            )
            .await
            .unwrap();
            assert_eq!((check.status, check.body.as_str()), (200, "OK"));

            // DEBUG_PORT: ratelimit's /rlconfig dump of the rules in force.
            let dump = weir_server::client::send(
                &format!("127.0.0.1:{debug_port}"),
                "GET",
                "/rlconfig",
                None,
                None,
                Duration::from_secs(10),
            )
            .await
            .unwrap();
            assert_eq!(dump.status, 200);
            assert!(
                dump.body.lines().any(|l| l
                    == "rl.category_account: unit=MINUTE requests_per_unit=4, shadow_mode: false, quota_mode: false"),
                "{}",
                dump.body
            );

            // Hits in ratelimit's names: 5 for category=account, 1 of them over the limit.
            let metrics = weir_server::client::send(
                &format!("127.0.0.1:{http_port}"),
                "GET",
                "/metrics",
                None,
                None,
                Duration::from_secs(10),
            )
            .await
            .unwrap()
            .body;
            let labels = r#"{domain="rl",key1="category_account",key2=""}"#;
            for line in [
                format!("ratelimit_service_rate_limit_total_hits{labels} 5"),
                format!("ratelimit_service_rate_limit_over_limit{labels} 1"),
                format!("ratelimit_service_rate_limit_within_limit{labels} 4"),
            ] {
                assert!(metrics.contains(&line), "missing {line}");
            }
        });
    // The counts are in the Redis of REDIS_URL, under CACHE_KEY_PREFIX.
    let keys = redis.raw("KEYS *").unwrap();
    assert!(keys.contains("rl_weir"), "{keys}");

    let status = weir.terminate();
    assert!(status.success(), "a clean stop on SIGTERM: {status:?}");
}
