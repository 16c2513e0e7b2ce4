//! `weir proxy` end to end as a command: the built binary in front of a tiny backend on
//! loopback ports chosen by the OS, with the built-in example rules (crawlers limited,
//! readers not), stopped by SIGTERM; and the options it refuses at start-up.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use common::{backend, spawn_logged, spawn_logged_with_env, terminate, weir};

/// GET / through `addr` as `user_agent`: the status code and the body.
fn get(addr: &str, user_agent: &str) -> (u16, String) {
    get_path(addr, "/", user_agent)
}

/// GET `path` through `addr` as `user_agent`: the status code and the body.
fn get_path(addr: &str, path: &str, user_agent: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: test\r\nuser-agent: {user_agent}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    let status = text.get(9..12).unwrap().parse().unwrap();
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

#[test]
fn proxy_forwards_limits_crawlers_and_stops_on_sigterm() {
    let upstream = format!("http://{}", backend());
    let proxy = spawn_logged(
        &[
            "proxy",
            "--upstream",
            &upstream,
            "--listen",
            "127.0.0.1:0",
            "--api",
            "127.0.0.1:0",
        ],
        "listen",
    );
    let addr = proxy.http.clone();
    // The example rules: each crawler IP 1 per second, readers 20 per second each.
    let bot = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
    assert_eq!(get(&addr, bot), (200, "backend".to_string()));
    assert_eq!(get(&addr, bot).0, 429);
    for _ in 0..5 {
        assert_eq!(
            get(&addr, "Mozilla/5.0 Firefox/128.0"),
            (200, "backend".to_string())
        );
    }
    assert!(terminate(proxy).success());
}

#[test]
fn proxy_refuses_bad_options_with_a_clear_message() {
    let cases: [(&[&str], &str); 6] = [
        (
            &[
                "proxy",
                "--upstream",
                "http://127.0.0.1:1",
                "--on-limit",
                "degrade",
            ],
            "--on-limit degrade needs --fallback-upstream",
        ),
        (
            &["proxy", "--upstream", "https://example.test"],
            "only http:// upstreams are supported",
        ),
        (
            &[
                "proxy",
                "--upstream",
                "http://127.0.0.1:1",
                "--class",
                "crawler",
            ],
            "class 'crawler': no '='",
        ),
        (
            &[
                "proxy",
                "--upstream",
                "http://127.0.0.1:1",
                "--trusted-proxy",
                "10.0.0.0/40",
            ],
            "the prefix is longer than the address",
        ),
        (
            &[
                "proxy",
                "--upstream",
                "http://127.0.0.1:1",
                "--breaker-slow-ratio",
                "2",
            ],
            "a ratio must be above 0 and at most 1",
        ),
        (
            &[
                "proxy",
                "--upstream",
                "http://127.0.0.1:1",
                "--breaker-window",
                "0s",
            ],
            "--breaker-*: breaker window must be above zero",
        ),
    ];
    for (args, message) in cases {
        let out = weir(args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

/// Issue 26: `--path-match` (and `WEIR_PATH_MATCH`) through the binary. By default
/// `/LOGIN/` spends `/login`'s budget and `/login%2f` is refused; `exact` keeps them apart;
/// `--help` explains both.
#[test]
fn proxy_reads_paths_as_routers_do_unless_told_exact() {
    let dir = std::env::temp_dir().join(format!("weir-cli-path-match-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("proxy.yaml");
    std::fs::write(
        &rules,
        "domain: proxy\ndescriptors:\n  - key: class\n    value: reader\n    descriptors:\n      - key: path\n        value: /login\n        rule: {algorithm: fixed_window, limit: 1, window: 1h}\n",
    )
    .unwrap();
    let upstream = format!("http://{}", backend());
    let rules = rules.display().to_string();
    let args = [
        "proxy",
        "--upstream",
        &upstream,
        "--config",
        &rules,
        "--listen",
        "127.0.0.1:0",
        "--api",
        "127.0.0.1:0",
    ];
    let reader = "Mozilla/5.0 Firefox/128.0";
    let proxy = spawn_logged(&args, "listen");
    assert_eq!(get_path(&proxy.http, "/login", reader).0, 200);
    assert_eq!(get_path(&proxy.http, "/LOGIN/", reader).0, 429);
    let (status, body) = get_path(&proxy.http, "/login%2f", reader);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("encoded slash"), "{body}");
    assert!(terminate(proxy).success());

    let exact = spawn_logged_with_env(&args, "listen", &[("WEIR_PATH_MATCH", "exact")]);
    assert_eq!(get_path(&exact.http, "/login", reader).0, 200);
    assert_eq!(get_path(&exact.http, "/login", reader).0, 429);
    assert_eq!(get_path(&exact.http, "/LOGIN/", reader).0, 200);
    assert!(terminate(exact).success());
    std::fs::remove_dir_all(&dir).unwrap();

    let help = String::from_utf8(weir(&["proxy", "--help"]).stdout).unwrap();
    for says in [
        "--path-match <MODE>",
        "[env: WEIR_PATH_MATCH=]",
        "[default: normalized]",
        "Paths (--path-match):",
        "X-Real-IP",
    ] {
        assert!(help.contains(says), "--help says {says:?}: {help}");
    }
}

/// POST `/v1/check` for the `proxy` domain's global descriptor to `addr`: the status code.
fn post_check(addr: &str) -> u16 {
    let body =
        r#"{"domain": "proxy", "descriptors": [{"entries": [{"key": "global", "value": "all"}]}]}"#;
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "POST /v1/check HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).unwrap();
    text.get(9..12).unwrap().parse().unwrap()
}

#[test]
fn the_api_listener_serves_decisions_only_with_api_decisions() {
    let upstream = format!("http://{}", backend());
    for (flag, expected) in [(None, 404), (Some("--api-decisions"), 200)] {
        let mut args = vec![
            "proxy",
            "--upstream",
            &upstream,
            "--listen",
            "127.0.0.1:0",
            "--api",
            "127.0.0.1:0",
        ];
        args.extend(flag);
        let proxy = spawn_logged(&args, "api");
        assert_eq!(post_check(&proxy.http), expected, "{flag:?}");
        assert!(terminate(proxy).success());
    }
}
