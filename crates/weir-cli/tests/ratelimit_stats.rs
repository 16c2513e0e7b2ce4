//! envoyproxy/ratelimit's statistics and health, over the built `weir` binary and real
//! sockets: `/metrics` read by curl as Prometheus scrapes it (ratelimit's counters keep
//! their names, in the Prometheus text format) and as an OpenMetrics-only client reads it
//! (`_total` added, as that format requires); the service-level series (calls, response
//! time, errors, global shadow mode, config loads) under ratelimit's Prometheus and statsd
//! names, the statsd ones received on a real UDP socket; and
//! `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED` (not ready until a rule file is in force).
//! Every wait is bounded: a log line, a UDP datagram, a process's answer.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::env_only::request;
use common::{spawn_logged_with_env, Served};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// ratelimit's own rule format: one a year for `user` (the binary runs on the system clock;
/// a yearly window keeps the window's end out of the test's few seconds).
const RULES: &str = "\
domain: stats
descriptors:
  - key: user
    rate_limit: {unit: year, requests_per_unit: 1}
";

/// What Prometheus 2.x sends by default: OpenMetrics first, the text format accepted.
const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

/// A fresh directory under the system's temporary one.
fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-rl-stats-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `weir serve` on loopback ports the OS picks, with `args` and `env`; its gRPC port.
fn serve(args: &[&str], env: &[(&str, &str)]) -> (Served, u16) {
    let mut all = vec!["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    all.extend_from_slice(args);
    let served = spawn_logged_with_env(&all, "http", env);
    let listening: serde_json::Value = serde_json::from_str(served.logs.last().unwrap()).unwrap();
    let grpc = listening["fields"]["grpc"].as_str().unwrap();
    let port = grpc.rsplit_once(':').unwrap().1.parse().unwrap();
    (served, port)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A gRPC channel to the loopback port `port`.
async fn channel(port: u16) -> Channel {
    Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect()
        .await
        .unwrap()
}

/// Three `ShouldRateLimit` calls under the global shadow mode: alice within the limit,
/// alice over it (answered OK: the global shadow mode), and one with an empty domain
/// (refused: a service error).
fn traffic(grpc_port: u16) {
    runtime().block_on(async {
        let mut rls = RateLimitServiceClient::new(channel(grpc_port).await);
        for _ in 0..2 {
            let answer = rls
                .should_rate_limit(request("stats", &[("user", "alice")]))
                .await;
            assert_eq!(answer.unwrap().into_inner().overall_code, 1, "OK");
        }
        let refused = rls
            .should_rate_limit(request("", &[("user", "alice")]))
            .await;
        assert_eq!(refused.unwrap_err().code(), tonic::Code::InvalidArgument);
    });
}

/// A directory holding [`RULES`], and `weir serve --shadow` on it after [`traffic`].
fn served_with_traffic(name: &str, env: &[(&str, &str)]) -> (Served, PathBuf) {
    let dir = temp(name);
    std::fs::write(dir.join("stats.yaml"), RULES).unwrap();
    let config = dir.display().to_string();
    let (served, grpc) = serve(&["--config", &config, "--shadow"], env);
    traffic(grpc);
    (served, dir)
}

/// `GET /metrics` with curl, sending `accept` (`None`: no `Accept` field at all): the
/// `Content-Type` answered and the body.
fn scrape(http: &str, accept: Option<&str>) -> (String, String) {
    // `Accept:` with no value makes curl send no Accept field at all.
    let header = accept.map_or_else(|| "Accept:".to_string(), |a| format!("Accept: {a}"));
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "10", "-D", "-", "-H", &header])
        .arg(format!("http://{http}/metrics"))
        .output()
        .expect("curl runs (apt-get install curl)");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_string)
        })
        .unwrap();
    (content_type, body.to_string())
}

fn has(body: &str, line: &str) {
    assert!(body.lines().any(|l| l == line), "no {line:?} in\n{body}");
}

/// Issue 28: ratelimit's counters were gauges, since OpenMetrics would rename them with
/// `_total`. A default Prometheus scrape (and a client without `Accept`) now gets the
/// Prometheus text format, where they are counters under ratelimit's names; a client that
/// accepts only OpenMetrics gets it, with `_total`. Weir's own series read the same in both.
#[test]
fn a_prometheus_scrape_gets_ratelimits_counters_under_its_names() {
    let (served, dir) = served_with_traffic("prom", &[]);
    let hits = r#"{domain="stats",key1="user",key2=""}"#;
    for accept in [Some(PROMETHEUS_ACCEPT), None, Some("*/*")] {
        let (content_type, body) = scrape(&served.http, accept);
        assert_eq!(content_type, "text/plain; version=0.0.4; charset=utf-8");
        for line in [
            "# TYPE ratelimit_service_rate_limit_total_hits counter",
            &format!("ratelimit_service_rate_limit_total_hits{hits} 2"),
            &format!("ratelimit_service_rate_limit_over_limit{hits} 1"),
            &format!("ratelimit_service_rate_limit_within_limit{hits} 1"),
            "# TYPE ratelimit_service_total_requests counter",
            r#"ratelimit_service_total_requests{grpc_method="ShouldRateLimit"} 3"#,
            r#"ratelimit_service_should_rate_limit_error{err_type="service_error"} 1"#,
            r#"ratelimit_service_should_rate_limit_error{err_type="redis_error"} 0"#,
            "ratelimit_service_global_shadow_mode 1",
            "ratelimit_service_config_load_success 1",
            "ratelimit_service_config_load_error 0",
            "# TYPE ratelimit_service_response_time_seconds histogram",
            r#"ratelimit_service_response_time_seconds_count{grpc_method="ShouldRateLimit"} 3"#,
            "# TYPE weir_decisions_total counter",
            r#"weir_decisions_total{domain="stats",rule="stats.user",outcome="shadow_denied"} 1"#,
        ] {
            has(&body, line);
        }
        assert!(!body.contains("# EOF") && !body.contains("_total_total"));
    }

    let (content_type, body) = scrape(&served.http, Some("application/openmetrics-text"));
    assert_eq!(
        content_type,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    for line in [
        "# TYPE ratelimit_service_rate_limit_total_hits counter",
        &format!("ratelimit_service_rate_limit_total_hits_total{hits} 2"),
        r#"ratelimit_service_total_requests_total{grpc_method="ShouldRateLimit"} 3"#,
        "ratelimit_service_config_load_success_total 1",
        "# TYPE weir_decisions counter",
        r#"weir_decisions_total{domain="stats",rule="stats.user",outcome="shadow_denied"} 1"#,
    ] {
        has(&body, line);
    }
    assert!(body.ends_with("# EOF\n"));
    drop(served);
    std::fs::remove_dir_all(dir).unwrap();
}

/// Issue 28: only the per-rule hits went to statsd. The service's own series go too, under
/// ratelimit's statsd names: calls, errors, global shadow mode, config loads (counters)
/// and each call's response time (a timer in ms), with `EXTRA_TAGS` as gostats writes them.
#[test]
fn use_statsd_sends_the_service_series_under_ratelimits_names() {
    let statsd = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    statsd
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let port = statsd.local_addr().unwrap().port().to_string();
    let (served, dir) = served_with_traffic(
        "statsd",
        &[
            ("USE_STATSD", "true"),
            ("STATSD_HOST", "127.0.0.1"),
            ("STATSD_PORT", &port),
            ("STATS_FLUSH_INTERVAL", "50ms"),
            ("EXTRA_TAGS", "app:rl"),
        ],
    );
    let wanted = [
        (
            "ratelimit_server.ShouldRateLimit.total_requests.__app=rl",
            3,
        ),
        (
            "ratelimit.service.call.should_rate_limit.service_error.__app=rl",
            1,
        ),
        ("ratelimit.service.global_shadow_mode.__app=rl", 1),
        ("ratelimit.service.config_load_success.__app=rl", 1),
        (
            "ratelimit.service.rate_limit.stats.user.total_hits.__app=rl",
            2,
        ),
    ];
    // Counts may arrive over several flushes: summed per name until they are all there.
    let mut sums = std::collections::HashMap::<String, u64>::new();
    let mut timings = Vec::new();
    let mut buf = [0_u8; 4096];
    while !wanted.iter().all(|(name, n)| sums.get(*name) == Some(n)) || timings.len() < 3 {
        let len = statsd
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("statsd metrics within 20 s ({e}); got {sums:?}"));
        for line in String::from_utf8_lossy(&buf[..len]).lines() {
            let (name, rest) = line.rsplit_once(':').unwrap();
            if let Some(count) = rest.strip_suffix("|c") {
                *sums.entry(name.to_string()).or_default() += count.parse::<u64>().unwrap();
            } else {
                assert_eq!(
                    name,
                    "ratelimit_server.ShouldRateLimit.response_time.__app=rl"
                );
                let ms = rest.strip_suffix("|ms").unwrap();
                timings.push(ms.parse::<u64>().unwrap());
            }
        }
    }
    assert_eq!(timings.len(), 3, "one timing per call: {timings:?}");
    assert!(!sums.keys().any(|n| n.contains("redis_error")), "{sums:?}");
    drop(served);
    std::fs::remove_dir_all(dir).unwrap();
}

/// `GET /healthcheck`: status and body.
fn healthcheck(http: &str) -> (u16, String) {
    let answer = runtime().block_on(weir_server::client::send(
        http,
        "GET",
        "/healthcheck",
        None,
        None,
        Duration::from_secs(10),
    ));
    let answer = answer.unwrap();
    (answer.status, answer.body)
}

fn grpc_health(grpc_port: u16) -> i32 {
    runtime().block_on(async {
        HealthClient::new(channel(grpc_port).await)
            .check(HealthCheckRequest {
                service: "ratelimit".to_string(),
            })
            .await
            .unwrap()
            .into_inner()
            .status
    })
}

/// Issue 28: `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED` was only warned about (Weir was
/// ready with an empty runtime directory). As ratelimit, the health check now fails (HTTP
/// 500, gRPC `NOT_SERVING`) until a rule file with a domain is loaded, and passes once one
/// is written into the directory.
#[test]
fn healthy_with_at_least_one_config_loaded_waits_for_a_rule_file() {
    let root = temp("health");
    let dir = root.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    let root_text = root.display().to_string();
    let (mut served, grpc) = serve(
        &[],
        &[
            ("RUNTIME_ROOT", &root_text),
            ("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"),
            ("USE_STATSD", "false"),
            ("WEIR_RELOAD_POLL", "50ms"),
        ],
    );
    assert!(
        !served
            .logs
            .iter()
            .any(|l| l.contains("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED is not honoured")),
        "{:#?}",
        served.logs
    );
    let (status, body) = healthcheck(&served.http);
    assert_eq!(status, 500, "{body}");
    assert!(body.contains("no rule file with a domain"), "{body}");
    assert_eq!(grpc_health(grpc), ServingStatus::NotServing as i32);

    write_atomically(&dir, "stats.yaml", RULES);
    served.wait_log("rules reloaded");
    assert_eq!(healthcheck(&served.http), (200, "OK".to_string()));
    assert_eq!(grpc_health(grpc), ServingStatus::Serving as i32);
    drop(served);
    std::fs::remove_dir_all(root).unwrap();
}

/// Writes `name` in `dir` whole (a rename), so a reload never reads half a file.
fn write_atomically(dir: &Path, name: &str, text: &str) {
    let temp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&temp, text).unwrap();
    std::fs::rename(temp, dir.join(name)).unwrap();
}
