//! `weir serve`, `weir decide` and `weir check-config` end to end: the built binary on
//! loopback ports chosen by the OS (`--http 127.0.0.1:0`), asked by `weir decide`, stopped
//! by SIGTERM. Every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{repo, serve, terminate, weir};

#[test]
fn serve_answers_decide_and_stops_on_sigterm() {
    let served = serve(&[
        "--config",
        &repo("crates/weir-server/tests/fixtures/envoy-readme"),
    ]);
    let ask = |value: &str| {
        weir(&[
            "decide",
            "--server",
            &served.http,
            "--domain",
            "edge_proxy_per_ip",
            "--descriptor",
            &format!("remote_address={value}"),
        ])
    };
    let allowed = ask("10.0.0.1");
    assert_eq!(allowed.status.code(), Some(0), "{allowed:?}");
    let text = String::from_utf8_lossy(&allowed.stdout);
    assert!(text.starts_with("OK\n"), "{text}");
    assert!(
        text.contains("edge_proxy_per_ip.remote_address: 9 of 10 left"),
        "{text}"
    );

    let denied = ask("50.0.0.5");
    assert_eq!(
        denied.status.code(),
        Some(2),
        "over the limit exits 2: {denied:?}"
    );
    assert!(String::from_utf8_lossy(&denied.stdout).starts_with("OVER_LIMIT\n"));

    let bad = weir(&[
        "decide",
        "--server",
        &served.http,
        "--domain",
        "",
        "-d",
        "a=b",
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("rate limit domain must not be empty"));

    let status = terminate(served);
    assert!(status.success(), "a clean stop on SIGTERM: {status:?}");
}

#[test]
fn serve_refuses_a_bad_store_or_config_at_startup() {
    let out = weir(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--store",
        "mongodb://x",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unsupported store 'mongodb://x': supported are memory, redis://"),
        "{err}"
    );

    let out = weir(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--config",
        "/no/such/rules.yaml",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/rules.yaml"));
}

#[test]
fn check_config_lists_rules_or_names_the_error() {
    let out = weir(&[
        "check-config",
        &repo("crates/weir-server/tests/fixtures/envoy-readme"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(": OK, 9 domains, "), "{text}");
    assert!(
        text.contains("messaging.message_type_marketing.to_number  fixed_window 5 per "),
        "{text}"
    );

    let dir = std::env::temp_dir().join(format!("weir-check-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.yaml");
    std::fs::write(&file, "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n").unwrap();
    let out = weir(&["check-config", &file.display().to_string()]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!("error: {}:4", file.display())),
        "names file and line: {err}"
    );
    assert!(err.contains("fortnight"), "{err}");
}

/// Issue 10: a 70 000-character rule key made `check-config` panic (exit 101).
#[test]
fn check_config_refuses_an_over_long_rule_key_without_panicking() {
    let dir = std::env::temp_dir().join(format!("weir-long-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("long.yaml");
    let key = "k".repeat(70_000);
    std::fs::write(
        &file,
        format!(
            "domain: d\ndescriptors:\n  - key: {key}\n    rate_limit: {{unit: second, requests_per_unit: 5}}\n"
        ),
    )
    .unwrap();
    let out = weir(&["check-config", &file.display().to_string()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("descriptors[0].key: is 70000 bytes, above the maximum of 256"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `weir serve --resp`: the Redis protocol on the engine's limiter and rules, stopped by the
/// same SIGTERM. Plain RESP over a TCP socket, as any Redis client sends it.
#[test]
fn serve_answers_the_redis_protocol_with_resp() {
    use std::io::{Read, Write};
    let served = common::spawn_logged(
        &[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--resp",
            "127.0.0.1:0",
        ],
        "resp",
    );
    let mut socket = std::net::TcpStream::connect(&served.http).unwrap();
    socket
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let mut ask = |words: &[&str]| {
        let mut request = format!("*{}\r\n", words.len());
        for w in words {
            request.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        socket.write_all(request.as_bytes()).unwrap();
        let mut buf = [0u8; 512];
        let n = socket.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(ask(&["PING"]), "+PONG\r\n");
    // redis-cell's README example: a burst of 15 (+1), 30 per minute.
    let first = ask(&["CL.THROTTLE", "user123", "15", "30", "60", "1"]);
    assert!(
        first.starts_with("*5\r\n:0\r\n:16\r\n:15\r\n:-1\r\n"),
        "{first}"
    );
    let unknown = ask(&["NOPE"]);
    assert!(unknown.starts_with("-ERR unknown command"), "{unknown}");
    let status = terminate(served);
    assert!(status.success(), "a clean stop on SIGTERM: {status:?}");
}

/// Issue 26: `--limit-overrides deny` (or `WEIR_LIMIT_OVERRIDES=deny`) refuses a request
/// that names its own limit, saying which option did; `--help` documents both.
#[test]
fn serve_refuses_limit_overrides_when_told() {
    let help = weir(&["serve", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--limit-overrides <POLICY>"), "{help}");
    assert!(help.contains("WEIR_LIMIT_OVERRIDES"), "{help}");
    let served = serve(&[
        "--config",
        &repo("crates/weir-server/tests/fixtures/envoy-readme"),
        "--limit-overrides",
        "deny",
    ]);
    let post = |body: &str| {
        use std::io::{Read as _, Write as _};
        let mut stream = std::net::TcpStream::connect(&served.http).unwrap();
        write!(
            stream,
            "POST /v1/check HTTP/1.1\r\nhost: weir\r\ncontent-type: application/json\r\n\
             connection: close\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    };
    let entries = r#"[{"key": "remote_address", "value": "10.0.0.1"}]"#;
    let answer = post(&format!(
        r#"{{"domain": "edge_proxy_per_ip", "descriptors": [{{"entries": {entries}, "limit": {{"requests_per_unit": 1000, "unit": "second"}}}}]}}"#
    ));
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("--limit-overrides deny"), "{answer}");
    let answer = post(&format!(
        r#"{{"domain": "edge_proxy_per_ip", "descriptors": [{{"entries": {entries}}}]}}"#
    ));
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let status = terminate(served);
    assert!(status.success(), "{status:?}");
}
