//! Issue 26, `weir serve` end to end (the built binary, real sockets, JSON logs):
//! `--admin-listen` moves the admin API and the dashboard off the decision port (refused
//! without a token), and TLS says what clients would find out alone: a WARN at start for an
//! expired or not yet valid certificate, and a WARN (at most one per 10 s, with a count)
//! for refused handshakes, which left no trace before.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

use common::{repo, serve, terminate, weir};

const TOKEN: &str = "test-admin-token-0123456789";

/// A scratch directory for this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The status of one plain HTTP/1.1 request (`connection: close`), bounded.
fn status(addr: &str, method: &str, path: &str, token: Option<&str>) -> u16 {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\n{auth}content-length: 0\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split(' ').nth(1).unwrap().parse().unwrap()
}

#[test]
fn admin_listen_serves_the_admin_api_and_dashboard_there_only() {
    let dir = scratch("admin-listen");
    let token_file = dir.join("token");
    std::fs::write(&token_file, TOKEN).unwrap();
    let served = serve(&[
        "--config",
        &repo("crates/weir-server/tests/fixtures/envoy-readme"),
        "--admin-listen",
        "127.0.0.1:0",
        "--admin-token-file",
        token_file.to_str().unwrap(),
    ]);
    let listening: serde_json::Value = serde_json::from_str(served.logs.last().unwrap()).unwrap();
    let admin = listening["fields"]["admin_listener"]
        .as_str()
        .unwrap()
        .to_string();
    let http = served.http.clone();
    assert_ne!(admin, http);

    for path in ["/admin/config", "/dashboard", "/dashboard/data"] {
        assert_eq!(
            status(&http, "GET", path, Some(TOKEN)),
            404,
            "{path} on --http"
        );
    }
    assert_eq!(status(&http, "GET", "/healthz", None), 200);
    assert_eq!(status(&http, "GET", "/metrics", None), 200);
    assert_eq!(status(&admin, "GET", "/admin/config", None), 401);
    assert_eq!(status(&admin, "GET", "/admin/config", Some(TOKEN)), 200);
    assert_eq!(status(&admin, "GET", "/dashboard", None), 200);
    assert_eq!(status(&admin, "POST", "/v1/check", Some(TOKEN)), 404);
    assert!(terminate(served).success());

    // Without a token there is no admin API to move: refused, saying what is missing.
    let out = weir(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--admin-listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--admin-listen serves the admin API, which needs a token"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A self-signed certificate for localhost valid from `from` to `until`; its files.
fn certificate(
    dir: &std::path::Path,
    name: &str,
    from: (i32, u8, u8),
    until: (i32, u8, u8),
) -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.not_before = rcgen::date_time_ymd(from.0, from.1, from.2);
    params.not_after = rcgen::date_time_ymd(until.0, until.1, until.2);
    let cert = params.self_signed(&key).unwrap();
    let (cert_file, key_file) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.key")),
    );
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    (
        cert_file.display().to_string(),
        key_file.display().to_string(),
    )
}

#[test]
fn bad_certificates_and_refused_handshakes_are_warned_about() {
    let dir = scratch("tls-warnings");
    let (expired, expired_key) = certificate(&dir, "expired", (2000, 1, 1), (2001, 1, 1));
    let (future, future_key) = certificate(&dir, "future", (2999, 1, 1), (3000, 1, 1));
    let mut served = serve(&[
        "--config",
        &repo("crates/weir-server/tests/fixtures/envoy-readme"),
        "--http-tls-cert",
        &expired,
        "--http-tls-key",
        &expired_key,
        "--grpc-tls-cert",
        &future,
        "--grpc-tls-key",
        &future_key,
    ]);
    let warned = |message: &str, listener: &str| {
        served.logs.iter().any(|line| {
            line.contains("\"WARN\"")
                && line.contains(message)
                && line.contains(&format!("\"listener\":\"{listener}\""))
        })
    };
    assert!(
        warned("the server certificate has expired", "HTTP"),
        "{:#?}",
        served.logs
    );
    assert!(warned("2001-01-01T00:00:00Z", "HTTP"), "{:#?}", served.logs);
    assert!(
        warned("the server certificate is not valid yet", "gRPC"),
        "{:#?}",
        served.logs
    );

    // A client speaking plain HTTP to the TLS port: the handshake is refused, and said.
    let mut stream = TcpStream::connect(&served.http).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let line = served.wait_log("TLS handshakes refused");
    assert!(line.contains("\"WARN\""), "{line}");
    assert!(line.contains("\"refused\":1"), "{line}");
    assert!(line.contains("\"listener\":\"HTTP\""), "{line}");
    assert!(terminate(served).success());
    let _ = std::fs::remove_dir_all(&dir);
}
