//! The real `redis-cli` (installed with redis-server) against the front end: one-shot
//! commands (`CL.THROTTLE`, `THROTTLE`, `WEIR.CHECK`), RESP3 (`-3`), `COMMAND DOCS`, an
//! unknown command, and `--pipe` (a whole file of commands pipelined, then redis-cli's
//! own `ECHO` to find the end). Without `redis-cli` each test says so on stderr and passes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::io::Write;
use std::process::Stdio;

use common::{request, start, PATIENCE};
use tokio::io::AsyncWriteExt;

/// `redis-cli`, or a visible note that it is missing.
fn redis_cli(test: &str) -> Option<&'static str> {
    let found = std::process::Command::new("redis-cli")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        // Straight to stderr, past the test harness's capture.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: redis-cli not found (apt-get install redis-server, or scripts/test installs it)"
        );
        return None;
    }
    Some("redis-cli")
}

/// Runs `redis-cli -p PORT args…` (stdin as given) and returns its stdout.
async fn run(port: u16, args: &[&str], stdin: &[u8]) -> String {
    let mut child = tokio::process::Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin).await.unwrap();
    drop(input);
    let out = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("redis-cli finishes")
        .unwrap();
    assert!(
        out.status.success(),
        "redis-cli {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn redis_cli_one_shot_commands() {
    let Some(_) = redis_cli("redis_cli_one_shot_commands") else {
        return;
    };
    let server = start().await;
    let port = server.addr.port();
    assert_eq!(run(port, &["PING"], b"").await, "PONG\n");
    assert_eq!(
        run(port, &["CL.THROTTLE", "user123", "15", "30", "60"], b"").await,
        "0\n16\n15\n-1\n2\n"
    );
    assert_eq!(
        run(port, &["THROTTLE", "user:123", "10", "100", "60"], b"").await,
        "1\n10\n9\n5\n0\n"
    );
    let check = run(
        port,
        &["WEIR.CHECK", "api", "remote_address", "10.0.0.1"],
        b"",
    )
    .await;
    assert!(
        check.starts_with("overall_code\nOK\ncode\nOK\nrule\napi.remote_address\n"),
        "{check}"
    );
    let unknown = run(port, &["NOSUCH", "x"], b"").await;
    assert!(
        unknown.starts_with("ERR unknown command 'NOSUCH', with args beginning with: 'x' \n"),
        "{unknown:?}"
    );
    let docs = run(port, &["COMMAND", "DOCS", "CL.THROTTLE"], b"").await;
    assert!(docs.contains("max_burst"), "{docs}");
    server.stop().await;
}

#[tokio::test]
async fn redis_cli_speaks_resp3_with_dash_3() {
    let Some(_) = redis_cli("redis_cli_speaks_resp3_with_dash_3") else {
        return;
    };
    let server = start().await;
    let port = server.addr.port();
    let hello = run(port, &["-3", "HELLO", "3"], b"").await;
    assert!(hello.contains("proto 3\n"), "{hello}");
    let check = run(
        port,
        &["-3", "WEIR.CHECK", "api", "remote_address", "10.0.0.2"],
        b"",
    )
    .await;
    assert!(check.contains("remaining 39\n"), "{check}");
    server.stop().await;
}

#[tokio::test]
async fn redis_cli_pipe_mode_sends_everything_at_once() {
    let Some(_) = redis_cli("redis_cli_pipe_mode_sends_everything_at_once") else {
        return;
    };
    let server = start().await;
    let mut input = Vec::new();
    for _ in 0..1000 {
        input.extend_from_slice(&request(&["CL.THROTTLE", "piped", "99", "100", "1"]));
    }
    let out = run(server.addr.port(), &["--pipe"], &input).await;
    assert!(out.contains("errors: 0, replies: 1000"), "{out}");
    // The 100 allowed used the burst: the next one is denied.
    let mut con = server.client(false).await;
    let got = common::ints(&mut con, &["CL.THROTTLE", "piped", "99", "100", "1"]).await;
    assert_eq!(got[0], 1);
    server.stop().await;
}
