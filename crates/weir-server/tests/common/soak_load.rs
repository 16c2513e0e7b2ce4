//! The soak's workload (`tests/soak.rs`): its rule file (domain `soak`) and its clients,
//! real ones on loopback sockets, paced, each checking every answer it gets: HTTP with a
//! connection per request (`weir_server::client`), HTTP/1.1 keep-alive (hyper), and gRPC
//! `ShouldRateLimit` (tonic). Not a load generator for benchmarks: a few hundred requests
//! per second, so the soak's CPU stays modest on a 2-core machine.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::common::{descriptor, request, TestServer};

/// The loose rule's limit (plus the reload count): no client can reach it.
pub const LOOSE: u64 = 1_000_000;
/// Every client waits this long between its requests: ~100 per second each.
const PACE: Duration = Duration::from_millis(10);
/// How many requests the keep-alive HTTP client sends on one connection.
const PER_CONNECTION: u64 = 100;
/// The longest one client request may take.
const DEADLINE: Duration = Duration::from_secs(5);

/// Domain `soak`: a loose limit (never reached), a tight one (denies most), a bucket, and
/// a key for the admin calls. Every rule falls back locally while Redis is down.
pub fn rules_yaml(loose: u64) -> String {
    format!(
        "domain: soak
descriptors:
  - key: user
    rule: {{algorithm: sliding_window, limit: {loose}, window: 1m, precision: 1s, on_failure: local_fallback}}
  - key: tight
    rule: {{algorithm: fixed_window, limit: 5, window: 1s, on_failure: local_fallback}}
  - key: bucket
    rule: {{algorithm: token_bucket, capacity: 20, rate: 20, per: 1s, on_failure: local_fallback}}
  - key: tenant
    rule: {{algorithm: gcra, rate: 1000, per: 1h, burst: 1000, on_failure: local_fallback}}
"
    )
}

/// The three descriptors of request `i`: a few hundred keys in all, shared by the clients.
fn entries(i: u64) -> [(&'static str, String); 3] {
    [
        ("user", format!("u{}", i % 200)),
        ("tight", format!("t{}", i % 10)),
        ("bucket", format!("b{}", i % 50)),
    ]
}

fn check_json(i: u64) -> String {
    let descriptors: Vec<Value> = entries(i)
        .iter()
        .map(|(k, v)| json!({"entries": [{"key": k, "value": v}]}))
        .collect();
    json!({"domain": "soak", "descriptors": descriptors}).to_string()
}

fn rls_request(i: u64) -> RateLimitRequest {
    let descriptors = entries(i)
        .iter()
        .map(|(k, v)| descriptor(&[(k, v.as_str())]))
        .collect();
    request("soak", descriptors)
}

/// What the clients saw.
#[derive(Default)]
pub struct Tally {
    pub answered: AtomicU64,
    pub denied: AtomicU64,
    pub errors: AtomicU64,
    pub first_errors: Mutex<Vec<String>>,
}

impl Tally {
    fn error(&self, what: String) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let mut first = self.first_errors.lock().unwrap();
        if first.len() < 20 {
            first.push(what);
        }
    }

    pub fn answered(&self) -> u64 {
        self.answered.load(Ordering::Relaxed)
    }

    /// An HTTP answer to `/v1/check`: 200 `OK` or 429 `OVER_LIMIT`, the loose limit `OK`.
    fn judge_http(&self, client: &str, status: u16, body: &[u8]) {
        let v: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        let overall = v["overall_code"].as_str();
        let loose = &v["descriptors"][0];
        let fine = matches!(
            (status, overall),
            (200, Some("OK")) | (429, Some("OVER_LIMIT"))
        ) && loose["code"] == "OK"
            && loose["limit"].as_u64().is_some_and(|l| l >= LOOSE);
        if !fine {
            let body = String::from_utf8_lossy(body);
            return self.error(format!("{client}: {status} {body}"));
        }
        self.answered.fetch_add(1, Ordering::Relaxed);
        if status == 429 {
            self.denied.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn pacer() -> tokio::time::Interval {
    let mut tick = tokio::time::interval(PACE);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick
}

/// One connection per request (`weir_server::client`, as `weir decide` sends).
async fn http_one_shot(addr: SocketAddr, stop: watch::Receiver<bool>, tally: Arc<Tally>) {
    let (addr, mut tick) = (addr.to_string(), pacer());
    for i in 0.. {
        tick.tick().await;
        if *stop.borrow() {
            return;
        }
        let body = check_json(i);
        let sent =
            weir_server::client::send(&addr, "POST", "/v1/check", Some(&body), None, DEADLINE);
        match sent.await {
            Ok(a) => tally.judge_http("http one-shot", a.status, a.body.as_bytes()),
            Err(e) => tally.error(format!("http one-shot: {e}")),
        }
    }
}

/// Keep-alive HTTP/1.1: [`PER_CONNECTION`] requests on each connection, then a new one.
async fn http_keep_alive(addr: SocketAddr, stop: watch::Receiver<bool>, tally: Arc<Tally>) {
    let mut tick = pacer();
    let mut i = 7;
    while !*stop.borrow() {
        let connected = async {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(std::io::Error::other)
        };
        let (mut sender, connection) = match connected.await {
            Ok(c) => c,
            Err(e) => {
                tally.error(format!("http keep-alive: connect: {e}"));
                tick.tick().await;
                continue;
            }
        };
        let driver = tokio::spawn(connection);
        for _ in 0..PER_CONNECTION {
            tick.tick().await;
            if *stop.borrow() {
                break;
            }
            i += 1;
            let request = hyper::Request::post("/v1/check")
                .header(hyper::header::HOST, addr.to_string())
                .header(hyper::header::CONTENT_TYPE, "application/json")
                .body(Full::new(Bytes::from(check_json(i))))
                .unwrap();
            let exchange = async {
                sender.ready().await?;
                let response = sender.send_request(request).await?;
                let status = response.status().as_u16();
                let body = response.into_body().collect().await?.to_bytes();
                Ok::<_, hyper::Error>((status, body))
            };
            match tokio::time::timeout(DEADLINE, exchange).await {
                Ok(Ok((status, body))) => tally.judge_http("http keep-alive", status, &body),
                Ok(Err(e)) => tally.error(format!("http keep-alive: {e}")),
                Err(_) => tally.error("http keep-alive: no answer within 5 s".into()),
            }
        }
        // Dropping the sender closes the connection; its driver then returns.
        drop(sender);
        if tokio::time::timeout(DEADLINE, driver).await.is_err() {
            tally.error("http keep-alive: the connection did not close".into());
        }
    }
}

/// `ShouldRateLimit` on one tonic channel for the whole run.
async fn grpc(addr: SocketAddr, first: u64, stop: watch::Receiver<bool>, tally: Arc<Tally>) {
    let url = format!("http://{addr}");
    let mut rls = match tokio::time::timeout(DEADLINE, RateLimitServiceClient::connect(url)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return tally.error(format!("grpc: connect: {e}")),
        Err(_) => return tally.error("grpc: no connection within 5 s".into()),
    };
    let mut tick = pacer();
    for i in first.. {
        tick.tick().await;
        if *stop.borrow() {
            return;
        }
        let answer =
            match tokio::time::timeout(DEADLINE, rls.should_rate_limit(rls_request(i))).await {
                Ok(Ok(a)) => a.into_inner(),
                Ok(Err(status)) => {
                    tally.error(format!("grpc: {status}"));
                    continue;
                }
                Err(_) => {
                    tally.error("grpc: no answer within 5 s".into());
                    continue;
                }
            };
        let overall = Code::try_from(answer.overall_code);
        let loose_ok = answer.statuses.first().map(|s| s.code) == Some(Code::Ok as i32);
        match overall {
            Ok(Code::Ok | Code::OverLimit) if loose_ok && answer.statuses.len() == 3 => {
                tally.answered.fetch_add(1, Ordering::Relaxed);
                if overall == Ok(Code::OverLimit) {
                    tally.denied.fetch_add(1, Ordering::Relaxed);
                }
            }
            _ => tally.error(format!("grpc: {answer:?}")),
        }
    }
}

/// The load: four clients, ~400 requests per second in all. Stops when `stop` turns true.
pub struct Load {
    stop: watch::Sender<bool>,
    clients: Vec<JoinHandle<()>>,
}

impl Load {
    pub fn start(server: &TestServer, tally: &Arc<Tally>) -> Load {
        let (stop, stopped) = watch::channel(false);
        let clients = vec![
            tokio::spawn(http_one_shot(
                server.http,
                stopped.clone(),
                Arc::clone(tally),
            )),
            tokio::spawn(http_keep_alive(
                server.http,
                stopped.clone(),
                Arc::clone(tally),
            )),
            tokio::spawn(grpc(server.grpc, 3, stopped.clone(), Arc::clone(tally))),
            tokio::spawn(grpc(server.grpc, 5, stopped, Arc::clone(tally))),
        ];
        Load { stop, clients }
    }

    /// Stops the clients and waits until each has returned (its connections closed).
    pub async fn stop(self) {
        self.stop.send(true).unwrap();
        for client in self.clients {
            tokio::time::timeout(Duration::from_secs(15), client)
                .await
                .expect("a client stops within 15 s")
                .expect("client task");
        }
    }
}
