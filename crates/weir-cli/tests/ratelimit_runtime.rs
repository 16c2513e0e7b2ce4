//! Issue 28, over the built `weir` binary and real sockets: under envoyproxy/ratelimit's
//! variables `weir serve` reads ratelimit's runtime directory (its default place when no
//! `RUNTIME_*` variable is set, never the built-in example), starts with it empty or missing
//! (a WARN, every domain unknown, as ratelimit answers), loads rule files written there
//! later, and limits them as ratelimit does (`bar*b`, `foo*bar*baz`, `share_threshold`);
//! `weir check-config` reads exactly the files `serve` reads (a Kubernetes ConfigMap
//! layout, `MERGE_DOMAIN_CONFIG`). Every wait is bounded and reads the process's own logs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::env_only::{request, Weir};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use tonic::transport::Channel;
use weir_testkit::ports::free_port;

/// A fresh directory under the system's temporary one.
fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-rl-runtime-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The answers to `requests`, asked in order over one gRPC connection.
fn answers(grpc_port: u16, requests: Vec<RateLimitRequest>) -> Vec<RateLimitResponse> {
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
            let mut rls = RateLimitServiceClient::new(channel);
            let mut answers = Vec::new();
            for request in requests {
                answers.push(rls.should_rate_limit(request).await.unwrap().into_inner());
            }
            answers
        })
}

/// The first status's `limit_remaining` of each of `requests`, asked in order.
fn remaining(grpc_port: u16, requests: Vec<RateLimitRequest>) -> Vec<u32> {
    answers(grpc_port, requests)
        .iter()
        .map(|answer| answer.statuses[0].limit_remaining)
        .collect()
}

/// The overall codes of `requests`, asked in order over one gRPC connection, and whether
/// a limit applied to any descriptor.
fn ask(grpc_port: u16, requests: Vec<RateLimitRequest>) -> Vec<(i32, bool)> {
    answers(grpc_port, requests)
        .iter()
        .map(|answer| {
            let limited = answer.statuses.iter().any(|s| s.current_limit.is_some());
            (answer.overall_code, limited)
        })
        .collect()
}

const OK: i32 = Code::Ok as i32;
const OVER: i32 = Code::OverLimit as i32;

/// The listener variables of ratelimit, on free loopback ports.
fn listeners() -> (u16, Vec<(&'static str, String)>) {
    let grpc = free_port();
    let env = vec![
        ("LOG_FORMAT", "json".to_string()),
        ("HOST", "127.0.0.1".to_string()),
        ("PORT", free_port().to_string()),
        ("GRPC_HOST", "127.0.0.1".to_string()),
        ("GRPC_PORT", grpc.to_string()),
    ];
    (grpc, env)
}

/// Weir's own file with ratelimit's wildcard forms and a shared wildcard. The binary runs
/// on the system clock: yearly windows keep a window's end out of the test's few seconds.
const WILD: &str = "\
domain: wild
descriptors:
  - key: midWild
    value: bar*b
    rate_limit: {unit: year, requests_per_unit: 2}
  - key: multiWild
    value: foo*bar*baz
    rate_limit: {unit: year, requests_per_unit: 1}
  - key: files
    value: files/*
    share_threshold: true
    rate_limit: {unit: year, requests_per_unit: 2}
";

/// Issue 28: with ratelimit's variables but no `RUNTIME_*` one, Weir served its built-in
/// example (domain `api` limited, every real domain unknown). Now it reads ratelimit's
/// default place, `/srv/runtime_data/current/config`; absent here, so it starts with no
/// domain, says so in a WARN, and the example's domain `api` limits nothing.
#[test]
fn ratelimits_variables_alone_read_its_default_runtime_directory_not_the_example() {
    if Path::new("/srv/runtime_data/current/config").exists() {
        println!("SKIPPED: /srv/runtime_data/current/config exists on this machine");
        return;
    }
    let (grpc, env) = listeners();
    let mut weir = Weir::start(&env);
    let warning = weir.wait_for("the runtime directory holds no rule file");
    assert!(warning.contains("\"level\":\"WARN\""), "{warning}");
    assert!(
        warning.contains("/srv/runtime_data/current/config"),
        "{warning}"
    );
    weir.wait_for("weir serve: listening");
    let codes = ask(
        grpc,
        vec![request("api", &[("remote_address", "10.0.0.1")])],
    );
    assert_eq!(codes, [(OK, false)], "the example's rules are not in force");
}

/// Issue 28: an empty (here missing) runtime directory was fatal ("holds no rule file").
/// Now Weir starts, answers as ratelimit does (unknown domain: OK), and rules written there
/// afterwards take effect; `bar*b`, `foo*bar*baz` and `share_threshold` then limit.
#[test]
fn rules_written_into_a_missing_runtime_directory_after_start_take_effect() {
    let root = temp("later");
    let (grpc, mut env) = listeners();
    env.extend([
        ("RUNTIME_ROOT", root.display().to_string()),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".to_string()),
        ("WEIR_RELOAD_POLL", "50ms".to_string()),
    ]);
    let mut weir = Weir::start(&env);
    weir.wait_for("the runtime directory holds no rule file");
    weir.wait_for("weir serve: listening");
    let wild = |value: &str| request("wild", &[("midWild", value)]);
    assert_eq!(ask(grpc, vec![wild("barXYZb")]), [(OK, false)]);

    let dir = root.join("ratelimit/config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".wild.yaml.tmp"), WILD).unwrap();
    std::fs::rename(dir.join(".wild.yaml.tmp"), dir.join("wild.yaml")).unwrap();
    weir.wait_for("rules reloaded");

    let codes = ask(
        grpc,
        vec![
            wild("barab"),
            wild("barXYZb"),
            wild("barXYZb"),
            wild("barXYZb"),
            wild("bara"),
            request("wild", &[("multiWild", "foo1bar2baz")]),
            request("wild", &[("multiWild", "foo1bar2baz")]),
            request("wild", &[("multiWild", "foo1baz")]),
            request("wild", &[("files", "files/a.pdf")]),
            request("wild", &[("files", "files/b.csv")]),
            request("wild", &[("files", "files/c.txt")]),
        ],
    );
    assert_eq!(
        codes,
        [
            (OK, true),
            (OK, true),
            (OK, true),
            (OVER, true),
            (OK, false),
            (OK, true),
            (OVER, true),
            (OK, false),
            (OK, true),
            (OK, true),
            (OVER, true),
        ]
    );
    drop(weir);
    std::fs::remove_dir_all(&root).unwrap();
}

/// `weir check-config` with `env` only.
fn check_config(env: &[(&str, String)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("check-config")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A runtime directory as Kubernetes mounts a ConfigMap: the files in a timestamped hidden
/// directory, `..data` linking to it, each file name linking through `..data`.
#[cfg(unix)]
fn config_map(root: &Path, files: &[(&str, &str)]) -> PathBuf {
    use std::os::unix::fs::symlink;
    let dir = root.join("ratelimit/config");
    let stamped = dir.join("..2026_11_28_10_00_00.000000001");
    std::fs::create_dir_all(&stamped).unwrap();
    for (name, yaml) in files {
        std::fs::write(stamped.join(name), yaml).unwrap();
        symlink(Path::new("..data").join(name), dir.join(name)).unwrap();
    }
    symlink("..2026_11_28_10_00_00.000000001", dir.join("..data")).unwrap();
    dir
}

/// Issue 28: on a ConfigMap layout `check-config` said OK while `serve` refused a
/// "duplicate" domain (ratelimit's runtime loader reads the timestamped directory too
/// unless `RUNTIME_IGNOREDOTFILES=true`). Both now take the same variables and one listing:
/// they refuse it alike without the variable and accept it alike with it.
#[cfg(unix)]
#[test]
fn check_config_reads_exactly_the_files_serve_reads_on_a_config_map() {
    let root = temp("configmap");
    config_map(&root, &[("wild.yaml", WILD)]);
    let runtime = |ignore: &str| {
        vec![
            ("RUNTIME_ROOT", root.display().to_string()),
            ("RUNTIME_SUBDIRECTORY", "ratelimit".to_string()),
            ("RUNTIME_IGNOREDOTFILES", ignore.to_string()),
        ]
    };
    let refused = check_config(&runtime("false"));
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("domain 'wild' is already defined in"),
        "{}",
        text(&refused)
    );
    let (_, mut env) = listeners();
    env.extend(runtime("false"));
    let served = Command::new(env!("CARGO_BIN_EXE_weir"))
        .arg("serve")
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .output()
        .unwrap();
    assert!(!served.status.success());
    assert!(
        text(&served).contains("domain 'wild' is already defined in"),
        "{}",
        text(&served)
    );

    let accepted = check_config(&runtime("true"));
    assert!(accepted.status.success(), "{}", text(&accepted));
    let summary = text(&accepted);
    assert!(
        summary.contains("ratelimit/config: OK, 1 domain, 3 rules"),
        "{summary}"
    );
    assert!(summary.contains("wild.midWild_bar*b"), "{summary}");
    std::fs::remove_dir_all(&root).unwrap();
}

/// `MERGE_DOMAIN_CONFIG=true` merges one domain over two files (refused without it), and
/// `check-config` honours it as `serve` does.
#[test]
fn merge_domain_config_merges_a_domain_over_two_files() {
    let root = temp("merge");
    let dir = root.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("one.yaml"),
        "domain: m\ndescriptors:\n  - key: key1\n    rate_limit: {unit: year, requests_per_unit: 1}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("two.yaml"),
        "domain: m\ndescriptors:\n  - key: key2\n    rate_limit: {unit: year, requests_per_unit: 1}\n",
    )
    .unwrap();
    let env = |merge: &str| {
        vec![
            ("RUNTIME_ROOT", root.display().to_string()),
            ("MERGE_DOMAIN_CONFIG", merge.to_string()),
        ]
    };
    let refused = check_config(&env("false"));
    assert!(!refused.status.success(), "{}", text(&refused));
    let merged = check_config(&env("true"));
    assert!(merged.status.success(), "{}", text(&merged));
    assert!(
        text(&merged).contains("OK, 1 domain, 2 rules"),
        "{}",
        text(&merged)
    );

    let (grpc, mut serve_env) = listeners();
    serve_env.extend(env("true"));
    let mut weir = Weir::start(&serve_env);
    weir.wait_for("weir serve: listening");
    let codes = ask(
        grpc,
        vec![
            request("m", &[("key1", "a")]),
            request("m", &[("key1", "a")]),
            request("m", &[("key2", "a")]),
        ],
    );
    assert_eq!(codes, [(OK, true), (OVER, true), (OK, true)]);
    drop(weir);
    std::fs::remove_dir_all(&root).unwrap();
}

/// Upstream's own integration runtime directory (`test/integration/runtime/current`),
/// unchanged, from a fetched snapshot of envoyproxy/ratelimit when
/// `WEIR_UPSTREAM_RATELIMIT_GIT` names its git directory: `check-config` accepts it under
/// its compose file's variables, `serve` serves it, and its `share_threshold` file shares
/// one counter across `files/*`.
#[test]
fn upstreams_integration_runtime_directory_serves_under_its_variables() {
    let Some(git) = std::env::var_os("WEIR_UPSTREAM_RATELIMIT_GIT") else {
        println!("SKIPPED: WEIR_UPSTREAM_RATELIMIT_GIT does not name envoyproxy/ratelimit's git directory");
        return;
    };
    let root = temp("upstream");
    let archive = Command::new("git")
        .arg("--git-dir")
        .arg(&git)
        .args([
            "archive",
            "--format=tar",
            "HEAD",
            "test/integration/runtime",
            "examples/ratelimit/config",
        ])
        .output()
        .unwrap();
    assert!(
        archive.status.success(),
        "{}",
        String::from_utf8_lossy(&archive.stderr)
    );
    let mut tar = Command::new("tar")
        .arg("-x")
        .arg("-C")
        .arg(&root)
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(tar.stdin.as_mut().unwrap(), &archive.stdout).unwrap();
    drop(tar.stdin.take());
    assert!(tar.wait().unwrap().success());
    let runtime = vec![
        (
            "RUNTIME_ROOT",
            root.join("test/integration/runtime/current")
                .display()
                .to_string(),
        ),
        ("RUNTIME_SUBDIRECTORY", "ratelimit".to_string()),
        ("RUNTIME_WATCH_ROOT", "false".to_string()),
        ("USE_STATSD", "false".to_string()),
    ];
    let checked = check_config(&runtime);
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(
        text(&checked).contains("OK, 3 domains"),
        "{}",
        text(&checked)
    );
    let examples = check_config(&[(
        "WEIR_CONFIG",
        root.join("examples/ratelimit/config").display().to_string(),
    )]);
    assert!(examples.status.success(), "{}", text(&examples));

    let (grpc, mut env) = listeners();
    env.extend(runtime);
    let mut weir = Weir::start(&env);
    weir.wait_for("weir serve: listening");
    let files = |value: &str| request("share-threshold-test", &[("files", value)]);
    let shared = remaining(
        grpc,
        vec![files("files/1"), files("files/2"), files("files/3")],
    );
    // 10 an hour over every files/* value: each request leaves one fewer (a wall-clock
    // hour's end may reset the count once, so one consecutive decrease is the proof).
    assert!(shared.windows(2).any(|w| w[1] + 1 == w[0]), "{shared:?}");
    let own = |value: &str| request("share-threshold-test", &[("files_no_share", value)]);
    let apart = remaining(grpc, vec![own("files_no_share/1"), own("files_no_share/2")]);
    assert_eq!(
        apart,
        [9, 9],
        "without share_threshold each value counts alone"
    );
    drop(weir);
    std::fs::remove_dir_all(&root).unwrap();
}

/// Issue 28: `USE_STATSD=true`, ratelimit's default, sent nothing. Now each rule's hits are
/// statsd counters under ratelimit's names, with `EXTRA_TAGS` as its gostats writes them,
/// received here on a real UDP socket.
#[test]
fn use_statsd_delivers_total_hits_counters_over_udp() {
    let root = temp("statsd");
    let dir = root.join("config");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("wild.yaml"), WILD).unwrap();
    let statsd = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    statsd
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let (grpc, mut env) = listeners();
    env.extend([
        ("RUNTIME_ROOT", root.display().to_string()),
        ("USE_STATSD", "true".to_string()),
        ("STATSD_HOST", "127.0.0.1".to_string()),
        (
            "STATSD_PORT",
            statsd.local_addr().unwrap().port().to_string(),
        ),
        ("STATS_FLUSH_INTERVAL", "50ms".to_string()),
        ("EXTRA_TAGS", "app:rl".to_string()),
    ]);
    let mut weir = Weir::start(&env);
    weir.wait_for("weir serve: listening");
    let codes = ask(
        grpc,
        vec![
            request("wild", &[("midWild", "barab")]),
            request("wild", &[("midWild", "barcb")]),
            request("wild", &[("multiWild", "foo1bar2baz")]),
            request("wild", &[("multiWild", "foo1bar2baz")]),
        ],
    );
    assert_eq!(codes[3], (OVER, true));
    // Counts may arrive over several flushes: summed per name until they are all there.
    let wanted = [
        (
            "ratelimit.service.rate_limit.wild.midWild_bar*b.total_hits.__app=rl",
            2,
        ),
        (
            "ratelimit.service.rate_limit.wild.multiWild_foo*bar*baz.total_hits.__app=rl",
            2,
        ),
        (
            "ratelimit.service.rate_limit.wild.multiWild_foo*bar*baz.over_limit.__app=rl",
            1,
        ),
        (
            "ratelimit.service.rate_limit.wild.multiWild_foo*bar*baz.within_limit.__app=rl",
            1,
        ),
    ];
    let mut sums = std::collections::HashMap::<String, u64>::new();
    let mut buf = [0_u8; 2048];
    while !wanted.iter().all(|(name, n)| sums.get(*name) == Some(n)) {
        let len = statsd
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("statsd counters within 20 s ({e}); got {sums:?}"));
        for line in String::from_utf8_lossy(&buf[..len]).lines() {
            let (name, rest) = line.rsplit_once(':').unwrap();
            // Counters only (the response-time timer is `|ms`: tests/ratelimit_stats.rs).
            if let Some(count) = rest.strip_suffix("|c") {
                *sums.entry(name.to_string()).or_default() += count.parse::<u64>().unwrap();
            }
        }
    }
    drop(weir);
    std::fs::remove_dir_all(&root).unwrap();
}
