//! Shared by the server's scenario tests: a server on real loopback sockets (bound to
//! `127.0.0.1:0`) under a `ManualClock`, a scratch directory for rule files, and small
//! HTTP / gRPC helpers. Every wait is bounded.

#![allow(dead_code)] // each test file uses a different part
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers state expectations by panicking

pub mod node_outage;
pub mod scenarios;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tonic::transport::Channel;
use weir_core::ManualClock;
use weir_server::{App, HttpAnswer, ServerError, Settings, SharedClock};

/// A day boundary (2023-11-15T00:00:00Z): every fixed window starts here.
pub const START_NS: u64 = 1_700_006_400 * 1_000_000_000;

/// The README examples of envoyproxy/ratelimit, one domain per file.
pub fn envoy_readme_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envoy-readme")
}

/// Bounds a test: no scenario may hang.
pub async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("test took longer than 60 s")
}

/// Settings with a manual clock at [`START_NS`] and rules from `rules` (if any).
pub fn settings(rules: Option<&Path>) -> (Settings, ManualClock) {
    let clock = ManualClock::new(START_NS);
    let mut settings = Settings::default();
    settings.engine.clock = SharedClock::new(clock.clone());
    if let Some(rules) = rules {
        settings = settings.with_rules(rules);
    }
    (settings, clock)
}

/// A server running on loopback sockets.
pub struct TestServer {
    pub http: SocketAddr,
    pub grpc: SocketAddr,
    pub app: App,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), ServerError>>>,
}

impl TestServer {
    pub async fn start(settings: Settings) -> TestServer {
        Self::start_on(settings, None).await
    }

    /// A server whose admin API and dashboard are on `admin` (bound by the caller).
    pub async fn start_with_admin(settings: Settings, admin: TcpListener) -> TestServer {
        Self::start_on(settings, Some(admin)).await
    }

    async fn start_on(settings: Settings, admin: Option<TcpListener>) -> TestServer {
        let app = App::new(settings).await.expect("server starts");
        let http = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let grpc = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (http_addr, grpc_addr) = (http.local_addr().unwrap(), grpc.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel::<()>();
        let mut listeners = weir_server::Listeners::new(http, grpc);
        if let Some(admin) = admin {
            listeners = listeners.with_admin(admin);
        }
        let task = tokio::spawn(weir_server::serve_on(app.clone(), listeners, async move {
            let _ = stopped.await;
        }));
        let server = TestServer {
            http: http_addr,
            grpc: grpc_addr,
            app,
            stop: Some(stop),
            task: Some(task),
        };
        // Serving (and so watching the rule files) once /healthz answers.
        assert_eq!(server.get("/healthz").await.status, 200);
        server
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        token: Option<&str>,
    ) -> HttpAnswer {
        weir_server::client::send(
            &self.http.to_string(),
            method,
            path,
            body,
            token,
            Duration::from_secs(10),
        )
        .await
        .expect("http call")
    }

    pub async fn post(&self, path: &str, body: &str) -> HttpAnswer {
        self.send("POST", path, Some(body), None).await
    }

    pub async fn get(&self, path: &str) -> HttpAnswer {
        self.send("GET", path, None, None).await
    }

    pub async fn grpc_client(&self) -> RateLimitServiceClient<Channel> {
        RateLimitServiceClient::connect(format!("http://{}", self.grpc))
            .await
            .expect("grpc connect")
    }

    /// Stops the server and waits until it has returned.
    pub async fn stop(mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let task = self.task.take().unwrap();
        tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .expect("server stops within 20 s")
            .expect("server task")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// One descriptor from `(key, value)` pairs.
pub fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: k.to_string(),
                value: v.to_string(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

/// A request for `domain` with these descriptors.
pub fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors,
        hits_addend: 0,
    }
}

/// A `/v1/check` body for one descriptor.
pub fn check_body(domain: &str, entries: &[(&str, &str)]) -> String {
    let entries: Vec<_> = entries
        .iter()
        .map(|(k, v)| serde_json::json!({"key": k, "value": v}))
        .collect();
    serde_json::json!({"domain": domain, "descriptors": [{"entries": entries}]}).to_string()
}

/// A scratch directory, removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "weir-server-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One envoyproxy/ratelimit-format domain with a single key limited per `unit`.
pub fn simple_rules(domain: &str, key: &str, per_unit: u64, unit: &str) -> String {
    format!(
        "domain: {domain}\ndescriptors:\n  - key: {key}\n    rate_limit:\n      unit: {unit}\n      requests_per_unit: {per_unit}\n"
    )
}
