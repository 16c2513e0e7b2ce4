//! `CONFIG_TYPE=GRPC_XDS_SOTW` over real sockets: the built `weir` binary subscribes to a
//! management server this test starts, a tonic ADS server built from the real protos
//! (envoy-types' `AggregatedDiscoveryService`). The server sends a `RateLimitConfig` and
//! sees the ACK (version and nonce); a real `ShouldRateLimit` shows the limit; a changed
//! config changes the limit in force; a bad one is NACKed with the loader's error in
//! `error_detail` while the old rules stay; a dropped stream is opened again, asking for
//! the version in force. Every wait is the protocol's own next message, bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::pin::Pin;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_server::{
    AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
};
use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::ratelimit::config::ratelimit::v3 as rls_conf;
use prost::Message as _;
use tokio::sync::mpsc;
use tokio_stream::wrappers::{ReceiverStream, TcpListenerStream};
use tokio_stream::Stream;
use tonic::transport::{Certificate, Channel, Identity, Server, ServerTlsConfig};
use tonic::{Request, Response, Status, Streaming};
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;
use weir_testkit::ports::free_port;

const TYPE_URL: &str = "type.googleapis.com/ratelimit.config.ratelimit.v3.RateLimitConfig";
/// The longest wait for any one message.
const WAIT: Duration = Duration::from_secs(20);

/// One ADS stream as the test drives it: what Weir asks, and where the answers go.
struct AdsStream {
    requests: Streaming<DiscoveryRequest>,
    responses: mpsc::Sender<Result<DiscoveryResponse, Status>>,
    /// The gRPC metadata the stream was opened with.
    metadata: tonic::metadata::MetadataMap,
}

impl AdsStream {
    async fn next_request(&mut self) -> DiscoveryRequest {
        tokio::time::timeout(WAIT, self.requests.message())
            .await
            .expect("weir sends a DiscoveryRequest within 20 s")
            .unwrap()
            .expect("the request stream stays open")
    }

    async fn send(&self, version: &str, nonce: &str, configs: &[rls_conf::RateLimitConfig]) {
        let resources = configs
            .iter()
            .map(|c| Any {
                type_url: TYPE_URL.to_string(),
                value: c.encode_to_vec(),
            })
            .collect();
        let response = DiscoveryResponse {
            version_info: version.to_string(),
            resources,
            type_url: TYPE_URL.to_string(),
            nonce: nonce.to_string(),
            ..DiscoveryResponse::default()
        };
        self.responses.send(Ok(response)).await.unwrap();
    }
}

/// The management server: every stream Weir opens is handed to the test.
struct Ads {
    streams: mpsc::UnboundedSender<AdsStream>,
}

type Responses = Pin<Box<dyn Stream<Item = Result<DiscoveryResponse, Status>> + Send>>;
type DeltaResponses = Pin<Box<dyn Stream<Item = Result<DeltaDiscoveryResponse, Status>> + Send>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for Ads {
    type StreamAggregatedResourcesStream = Responses;
    type DeltaAggregatedResourcesStream = DeltaResponses;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<Response<Responses>, Status> {
        let (responses, rx) = mpsc::channel(4);
        let metadata = request.metadata().clone();
        let stream = AdsStream {
            requests: request.into_inner(),
            responses,
            metadata,
        };
        self.streams
            .send(stream)
            .map_err(|_| Status::unavailable("test over"))?;
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delta_aggregated_resources(
        &self,
        _request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<Response<DeltaResponses>, Status> {
        Err(Status::unimplemented("state of the world only"))
    }
}

/// A `weir serve` process, killed when dropped.
struct Weir(Child);

impl Drop for Weir {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn config(version_limit: u32) -> rls_conf::RateLimitConfig {
    rls_conf::RateLimitConfig {
        name: "xds-rules".to_string(),
        domain: "xds".to_string(),
        descriptors: vec![rls_conf::RateLimitDescriptor {
            key: "user".to_string(),
            rate_limit: Some(rls_conf::RateLimitPolicy {
                // The binary runs on the system clock: a yearly window keeps the window's
                // end out of the test's few seconds.
                unit: rls_conf::RateLimitUnit::Year as i32,
                requests_per_unit: version_limit,
                ..rls_conf::RateLimitPolicy::default()
            }),
            ..rls_conf::RateLimitDescriptor::default()
        }],
    }
}

async fn ask(grpc: &Channel, user: &str) -> RateLimitResponse {
    let request = common::env_only::request("xds", &[("user", user)]);
    RateLimitServiceClient::new(grpc.clone())
        .should_rate_limit(request)
        .await
        .unwrap()
        .into_inner()
}

fn limit_of(answer: &RateLimitResponse) -> u32 {
    answer.statuses[0]
        .current_limit
        .as_ref()
        .expect("a limit applies")
        .requests_per_unit
}

/// A channel to `uri`, once it listens (the listener is bound right after the ACK is sent:
/// each attempt is a real connect, bounded by [`WAIT`] in all).
async fn connect(uri: &str) -> Channel {
    let endpoint = Channel::from_shared(uri.to_string()).unwrap();
    tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(channel) = endpoint.connect().await {
                return channel;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("weir listens within 20 s of its first update")
}

async fn serving(grpc: &Channel) -> i32 {
    HealthClient::new(grpc.clone())
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .unwrap()
        .into_inner()
        .status
}

/// The management server and `weir serve` (with ratelimit's variables and `extra`) subscribed
/// to it: the process, the streams it opens, its gRPC and HTTP ports.
async fn start(
    extra: &[(&'static str, String)],
) -> (Weir, mpsc::UnboundedReceiver<AdsStream>, u16, u16) {
    start_with(extra, None).await
}

/// [`start`] with the management server serving `tls`.
async fn start_with(
    extra: &[(&'static str, String)],
    tls: Option<ServerTlsConfig>,
) -> (Weir, mpsc::UnboundedReceiver<AdsStream>, u16, u16) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let ads_addr = listener.local_addr().unwrap();
    let (streams_tx, streams) = mpsc::unbounded_channel();
    let mut server = Server::builder();
    if let Some(tls) = tls {
        server = server.tls_config(tls).unwrap();
    }
    tokio::spawn(
        server
            .add_service(AggregatedDiscoveryServiceServer::new(Ads {
                streams: streams_tx,
            }))
            .serve_with_incoming(TcpListenerStream::new(listener)),
    );
    let grpc_port = free_port();
    let http_port = free_port();
    let mut env = vec![
        ("CONFIG_TYPE", "GRPC_XDS_SOTW".to_string()),
        ("CONFIG_GRPC_XDS_SERVER_URL", ads_addr.to_string()),
        ("CONFIG_GRPC_XDS_NODE_ID", "weir-test-node".to_string()),
        ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=test".to_string()),
        (
            "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
            "x-tenant:t1".to_string(),
        ),
        // A reconnect within the test's time; the wait is still jittered and bounded.
        ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "50ms".to_string()),
        ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "200ms".to_string()),
        ("USE_STATSD", "false".to_string()),
        ("LOG_FORMAT", "json".to_string()),
        ("HOST", "127.0.0.1".to_string()),
        ("PORT", http_port.to_string()),
        ("GRPC_HOST", "127.0.0.1".to_string()),
        ("GRPC_PORT", grpc_port.to_string()),
    ];
    env.extend(extra.iter().cloned());
    let weir = Weir(
        Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("serve")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );

    (weir, streams, grpc_port, http_port)
}

/// Issue 28 (xDS): an update changes the rules in force, a bad one is NACKed and the rules
/// in force stay, a dropped stream is subscribed to again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xds_updates_change_the_rules_in_force_and_a_bad_one_is_nacked() {
    let (_weir, mut streams, grpc_port, http_port) = start(&[]).await;

    // The subscription: this node, the resource type, nothing accepted yet.
    let mut stream = next_stream(&mut streams).await;
    assert_eq!(stream.metadata.get("x-tenant").unwrap(), "t1");
    let first = stream.next_request().await;
    assert_eq!(first.type_url, TYPE_URL);
    assert_eq!(first.version_info, "");
    assert_eq!(first.response_nonce, "");
    let node = first.node.unwrap();
    assert_eq!(node.id, "weir-test-node");
    assert!(node.metadata.unwrap().fields.contains_key("zone"));

    // As ratelimit: nothing listens before the first update is in force.
    let uri = format!("http://127.0.0.1:{grpc_port}");
    let before = Channel::from_shared(uri.clone()).unwrap().connect().await;
    assert!(before.is_err(), "no gRPC listener before the first update");

    // Version 1: the ACK carries its version and nonce; the limit is in force.
    stream.send("1", "nonce-1", &[config(1)]).await;
    let ack = stream.next_request().await;
    assert_eq!(
        (ack.version_info.as_str(), ack.response_nonce.as_str()),
        ("1", "nonce-1")
    );
    assert!(ack.error_detail.is_none());
    let grpc = connect(&uri).await;
    assert_eq!(serving(&grpc).await, ServingStatus::Serving as i32);
    let answer = ask(&grpc, "alice").await;
    assert_eq!(
        (answer.overall_code, limit_of(&answer)),
        (Code::Ok as i32, 1)
    );
    assert_eq!(
        ask(&grpc, "alice").await.overall_code,
        Code::OverLimit as i32
    );

    // Version 2 changes the limit in force.
    stream.send("2", "nonce-2", &[config(5)]).await;
    let ack = stream.next_request().await;
    assert_eq!(
        (ack.version_info.as_str(), ack.response_nonce.as_str()),
        ("2", "nonce-2")
    );
    assert!(ack.error_detail.is_none());
    assert_eq!(limit_of(&ask(&grpc, "bob").await), 5);

    // Version 3 is invalid (no unit): NACKed with the loader's error, naming the resource;
    // the last good version is the one reported, and its rules stay in force.
    let mut bad = config(7);
    bad.descriptors[0].rate_limit.as_mut().unwrap().unit = rls_conf::RateLimitUnit::Unknown as i32;
    stream.send("3", "nonce-3", &[bad]).await;
    let nack = stream.next_request().await;
    assert_eq!(
        (nack.version_info.as_str(), nack.response_nonce.as_str()),
        ("2", "nonce-3")
    );
    let detail = nack.error_detail.expect("a NACK carries the error");
    assert_eq!(detail.code, 3, "INVALID_ARGUMENT");
    assert!(
        detail.message.contains("xds:xds-rules"),
        "{}",
        detail.message
    );
    assert_eq!(limit_of(&ask(&grpc, "carol").await), 5);

    // A resource of another type is NACKed too.
    stream
        .responses
        .send(Ok(DiscoveryResponse {
            version_info: "4".to_string(),
            resources: vec![Any {
                type_url: "type.googleapis.com/envoy.config.cluster.v3.Cluster".to_string(),
                value: Vec::new(),
            }],
            type_url: TYPE_URL.to_string(),
            nonce: "nonce-4".to_string(),
            ..DiscoveryResponse::default()
        }))
        .await
        .unwrap();
    let nack = stream.next_request().await;
    assert_eq!(nack.version_info, "2");
    assert!(nack.error_detail.unwrap().message.contains("Cluster"));
    assert_eq!(limit_of(&ask(&grpc, "dave").await), 5);

    // The server drops the stream: weir subscribes again, asking for the version in force,
    // and keeps serving those rules meanwhile.
    drop(stream);
    let mut again = next_stream(&mut streams).await;
    let resubscribe = again.next_request().await;
    assert_eq!(resubscribe.version_info, "2");
    assert_eq!(resubscribe.response_nonce, "");
    assert_eq!(limit_of(&ask(&grpc, "erin").await), 5);
    again.send("5", "nonce-5", &[config(9)]).await;
    let ack = again.next_request().await;
    assert_eq!(ack.version_info, "5");
    assert_eq!(limit_of(&ask(&grpc, "frank").await), 9);

    // Each update is counted as a config load, under Weir's and ratelimit's names.
    let metrics = weir_server::client::send(
        &format!("127.0.0.1:{http_port}"),
        "GET",
        "/metrics",
        None,
        None,
        WAIT,
    )
    .await
    .unwrap()
    .body;
    for line in [
        "weir_config_reloads_total{result=\"success\"} 3",
        "weir_config_reloads_total{result=\"failure\"} 2",
        "ratelimit_service_config_load_success 3",
        "ratelimit_service_config_load_error 2",
    ] {
        assert!(metrics.lines().any(|l| l == line), "{line} in\n{metrics}");
    }
}

/// `weir check-config` under `CONFIG_TYPE=GRPC_XDS_SOTW` has no file to read: it says where
/// serve would take its rules from and fails, never reporting an empty rule set as OK.
#[test]
fn check_config_under_xds_says_the_rules_come_from_the_server() {
    let output = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("check-config")
        .env_clear()
        .env("CONFIG_TYPE", "GRPC_XDS_SOTW")
        .env("CONFIG_GRPC_XDS_SERVER_URL", "127.0.0.1:18000")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("xDS management server 127.0.0.1:18000"),
        "{stderr}"
    );
}

/// `FORCE_START_WITHOUT_INITIAL_CONFIG=true`: weir listens before the first update, is not
/// ready meanwhile, and becomes ready once an update is in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn force_start_listens_before_the_first_update_and_is_not_ready_until_it() {
    let (_weir, mut streams, grpc_port, _) =
        start(&[("FORCE_START_WITHOUT_INITIAL_CONFIG", "true".to_string())]).await;
    let mut stream = next_stream(&mut streams).await;
    stream.next_request().await;
    let grpc = connect(&format!("http://127.0.0.1:{grpc_port}")).await;
    assert_eq!(serving(&grpc).await, ServingStatus::NotServing as i32);
    stream.send("1", "n1", &[config(2)]).await;
    assert_eq!(stream.next_request().await.version_info, "1");
    assert_eq!(serving(&grpc).await, ServingStatus::Serving as i32);
    assert_eq!(limit_of(&ask(&grpc, "alice").await), 2);
}

/// The next ADS stream weir opens, within [`WAIT`].
async fn next_stream(streams: &mut mpsc::UnboundedReceiver<AdsStream>) -> AdsStream {
    tokio::time::timeout(WAIT, streams.recv())
        .await
        .expect("weir opens an ADS stream within 20 s")
        .unwrap()
}

/// The first stream's subscription, and version 1 (`limit` a year) ACKed.
async fn first_config(streams: &mut mpsc::UnboundedReceiver<AdsStream>, limit: u32) -> AdsStream {
    let mut stream = next_stream(streams).await;
    stream.next_request().await;
    stream.send("1", "n1", &[config(limit)]).await;
    assert_eq!(stream.next_request().await.version_info, "1");
    stream
}

/// SIGTERM, and the exit status within [`WAIT`].
async fn stop(mut weir: Weir) -> std::process::ExitStatus {
    let pid = weir.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    tokio::time::timeout(WAIT, tokio::task::spawn_blocking(move || weir.0.wait()))
        .await
        .expect("weir stops within 20 s of SIGTERM")
        .unwrap()
        .unwrap()
}

/// Under xDS the state file used to be read at start, before any rule was in force: every
/// record was dropped as having no rule, so a restart lifted every limit and lockout. It is
/// read once the first update is in force now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limited_key_in_the_state_file_survives_a_restart_under_xds() {
    let dir = std::env::temp_dir().join(format!("weir-xds-state-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let state = ("WEIR_STATE_FILE", dir.join("state").display().to_string());

    let (weir, mut streams, grpc_port, _) = start(std::slice::from_ref(&state)).await;
    let _stream = first_config(&mut streams, 1).await;
    let grpc = connect(&format!("http://127.0.0.1:{grpc_port}")).await;
    assert_eq!(ask(&grpc, "alice").await.overall_code, Code::Ok as i32);
    assert_eq!(
        ask(&grpc, "alice").await.overall_code,
        Code::OverLimit as i32
    );
    assert!(stop(weir).await.success());

    let (_weir, mut streams, grpc_port, _) = start(std::slice::from_ref(&state)).await;
    let _stream = first_config(&mut streams, 1).await;
    let grpc = connect(&format!("http://127.0.0.1:{grpc_port}")).await;
    assert_eq!(
        ask(&grpc, "alice").await.overall_code,
        Code::OverLimit as i32,
        "alice's spent budget came back with the rules"
    );
    assert_eq!(ask(&grpc, "bob").await.overall_code, Code::Ok as i32);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// ratelimit's xDS TLS variables (`CONFIG_GRPC_XDS_SERVER_USE_TLS`, `_SERVER_TLS_CACERT`,
/// `_CLIENT_TLS_CERT` / `_KEY`, `_SERVER_TLS_SAN`) against a management server that serves
/// mutual TLS: its certificate names only `xds.internal` (not the address dialled, so the
/// SAN variable is what lets it verify), and it refuses a client without a certificate
/// from its CA. An update ACKed over that stream is in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xds_over_mutual_tls_verifies_the_server_by_its_san() {
    let dir = std::env::temp_dir().join(format!("weir-xds-tls-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    common::tls_files(&dir, "xds.internal");
    let file = |name: &str| dir.join(name).display().to_string();
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let tls = ServerTlsConfig::new()
        .identity(Identity::from_pem(read("server.pem"), read("server.key")))
        .client_ca_root(Certificate::from_pem(read("ca.pem")));
    let (_weir, mut streams, grpc_port, _) = start_with(
        &[
            ("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true".to_string()),
            ("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", file("ca.pem")),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", file("client.pem")),
            ("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", file("client.key")),
            ("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "xds.internal".to_string()),
        ],
        Some(tls),
    )
    .await;
    let _stream = first_config(&mut streams, 3).await;
    let grpc = connect(&format!("http://127.0.0.1:{grpc_port}")).await;
    assert_eq!(limit_of(&ask(&grpc, "alice").await), 3);
    std::fs::remove_dir_all(&dir).unwrap();
}
