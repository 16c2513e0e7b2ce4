//! The xDS client: one task that subscribes to `RateLimitConfig` resources over ADS, state
//! of the world (`envoy.service.discovery.v3.AggregatedDiscoveryService/
//! StreamAggregatedResources`), as ratelimit's `XdsGrpcSotwProvider` does. Each
//! `DiscoveryResponse` is a whole new rule set: converted (`convert.rs`) and put in force
//! through `Engine::apply_rules`, the reload path of rule files (same validation, status,
//! log and config-load metrics; the state file waits for the first rules in force). A good update is ACKed (its `version_info` and `nonce`); a bad
//! one is NACKed (the last good version, its nonce, and the error in `error_detail`) and the
//! rules in force stay. A stream that breaks is opened again after a bounded, jittered wait
//! (`backoff.rs`), asking for the last version in force. Never touches the listeners.

use std::time::Duration;

use anyhow::Context as _;
use envoy_types::pb::envoy::config::core::v3::Node;
use envoy_types::pb::envoy::service::discovery::v3::aggregated_discovery_service_client::AggregatedDiscoveryServiceClient;
use envoy_types::pb::envoy::service::discovery::v3::{DiscoveryRequest, DiscoveryResponse};
use envoy_types::pb::google::protobuf::{value::Kind, Struct, Value};
use envoy_types::pb::google::rpc::Status;
use tokio::sync::{mpsc, watch};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Endpoint, Identity};
use weir_engine::{Engine, ReloadOutcome};

use super::backoff::{connect_delay, draw};
use super::convert::{self, TYPE_URL};
use super::settings::XdsSettings;

/// gRPC's `INVALID_ARGUMENT`, the code of a NACK's `error_detail`.
const INVALID_ARGUMENT: i32 = 3;
/// How long one connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Starts the client; abort the task to stop it. The receiver turns true once a first
/// update is in force (and the state file, if any, read under it).
pub(crate) fn spawn(
    settings: XdsSettings,
    engine: Engine,
) -> (tokio::task::JoinHandle<()>, watch::Receiver<bool>) {
    let (in_force, first) = watch::channel(false);
    (tokio::spawn(run(settings, engine, in_force)), first)
}

async fn run(settings: XdsSettings, engine: Engine, in_force: watch::Sender<bool>) {
    tracing::info!(server = %settings.server, node = %settings.node_id, "starting the xDS client for rate limit configurations");
    if settings.tls.is_none() && !settings.is_local() {
        tracing::warn!(server = %settings.server, "the xDS management server is reached without TLS beyond loopback: whoever is on the path can change every limit (CONFIG_GRPC_XDS_SERVER_USE_TLS=true with CONFIG_GRPC_XDS_SERVER_TLS_CACERT)");
    }
    // The version in force, asked for again when a stream is opened again.
    let mut version = String::new();
    let mut failures: u32 = 0;
    loop {
        let channel = match connect(&settings).await {
            Ok(channel) => channel,
            Err(error) => {
                let wait = connect_delay(settings.connect_retry, draw());
                tracing::warn!(server = %settings.server, error = %format!("{error:#}"), ?wait, "cannot reach the xDS management server; rules in force are kept");
                tokio::time::sleep(wait).await;
                continue;
            }
        };
        match subscribe(&settings, channel, &engine, &in_force, &mut version).await {
            Ok(true) => failures = 0,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(server = %settings.server, error = %format!("{error:#}"), "the xDS stream failed")
            }
        }
        let wait = settings.backoff.delay(failures, draw());
        failures = failures.saturating_add(1);
        tracing::warn!(server = %settings.server, ?wait, "the xDS stream ended; rules in force are kept; subscribing again after the wait");
        tokio::time::sleep(wait).await;
    }
}

async fn connect(settings: &XdsSettings) -> anyhow::Result<Channel> {
    let mut endpoint = Endpoint::from_shared(settings.uri())
        .context("CONFIG_GRPC_XDS_SERVER_URL")?
        .connect_timeout(CONNECT_TIMEOUT);
    if let Some(tls) = &settings.tls {
        let ca = std::fs::read(&tls.ca)
            .with_context(|| format!("CONFIG_GRPC_XDS_SERVER_TLS_CACERT {}", tls.ca.display()))?;
        let mut config = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca));
        if let Some((cert, key)) = &tls.identity {
            let cert = std::fs::read(cert)
                .with_context(|| format!("CONFIG_GRPC_XDS_CLIENT_TLS_CERT {}", cert.display()))?;
            let key = std::fs::read(key)
                .with_context(|| format!("CONFIG_GRPC_XDS_CLIENT_TLS_KEY {}", key.display()))?;
            config = config.identity(Identity::from_pem(cert, key));
        }
        if let Some(name) = &tls.server_name {
            config = config.domain_name(name.clone());
        }
        endpoint = endpoint.tls_config(config).context("xDS TLS")?;
    }
    tracing::info!(server = %settings.server, "dialing the xDS management server");
    Ok(endpoint.connect().await?)
}

/// One ADS stream until it ends: `Ok(true)` if it delivered at least one response.
async fn subscribe(
    settings: &XdsSettings,
    channel: Channel,
    engine: &Engine,
    in_force: &watch::Sender<bool>,
    version: &mut String,
) -> anyhow::Result<bool> {
    let (requests, outgoing) = mpsc::channel::<DiscoveryRequest>(4);
    requests
        .send(request(settings, version, "", None))
        .await
        .context("the request stream closed")?;
    let mut call = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(outgoing));
    for (name, value) in &settings.headers {
        // Checked when the variable was read.
        if let (Ok(name), Ok(value)) = (
            tonic::metadata::MetadataKey::from_bytes(name.as_bytes()),
            value.parse(),
        ) {
            call.metadata_mut().insert(name, value);
        }
    }
    let mut client = AggregatedDiscoveryServiceClient::new(channel)
        .max_decoding_message_size(settings.max_message_bytes);
    let mut responses = client
        .stream_aggregated_resources(call)
        .await
        .context("StreamAggregatedResources")?
        .into_inner();
    tracing::info!(server = %settings.server, "subscribed to rate limit configurations over xDS");
    let mut delivered = false;
    while let Some(response) = responses.message().await? {
        delivered = true;
        let reply = answer(settings, engine, in_force, &response, version);
        requests
            .send(reply)
            .await
            .context("the request stream closed")?;
    }
    Ok(delivered)
}

/// Applies one response and returns its ACK or NACK.
fn answer(
    settings: &XdsSettings,
    engine: &Engine,
    in_force: &watch::Sender<bool>,
    response: &DiscoveryResponse,
    version: &mut String,
) -> DiscoveryRequest {
    let loaded = if response.type_url == TYPE_URL {
        convert::rules(&response.resources, settings.merge_domains)
    } else {
        Err(weir_config::ConfigError::Rejected {
            origin: "xds:response".into(),
            reason: format!("type {:?}, expected {TYPE_URL}", response.type_url),
        })
    };
    match engine.apply_rules(loaded, "xds") {
        ReloadOutcome::Swapped(generation) => {
            in_force.send_replace(true);
            tracing::info!(version = %response.version_info, nonce = %response.nonce, resources = response.resources.len(), generation, "xDS update in force (ACK)");
            version.clone_from(&response.version_info);
            request(settings, version, &response.nonce, None)
        }
        ReloadOutcome::Kept(error) => {
            tracing::warn!(version = %response.version_info, nonce = %response.nonce, %error, "xDS update refused (NACK); the rules in force are kept");
            let detail = Status {
                code: INVALID_ARGUMENT,
                message: error,
                details: Vec::new(),
            };
            request(settings, version, &response.nonce, Some(detail))
        }
    }
}

fn request(
    settings: &XdsSettings,
    version: &str,
    nonce: &str,
    error_detail: Option<Status>,
) -> DiscoveryRequest {
    DiscoveryRequest {
        version_info: version.to_string(),
        node: Some(node(settings)),
        type_url: TYPE_URL.to_string(),
        response_nonce: nonce.to_string(),
        error_detail,
        ..DiscoveryRequest::default()
    }
}

/// This node as ratelimit names it: `CONFIG_GRPC_XDS_NODE_ID`, and its metadata as strings.
fn node(settings: &XdsSettings) -> Node {
    let fields = settings
        .node_metadata
        .iter()
        .map(|(key, value)| {
            let value = Value {
                kind: Some(Kind::StringValue(value.clone())),
            };
            (key.clone(), value)
        })
        .collect();
    Node {
        id: settings.node_id.clone(),
        metadata: Some(Struct { fields }),
        ..Node::default()
    }
}
