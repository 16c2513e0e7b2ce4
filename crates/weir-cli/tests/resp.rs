//! Issue 27: `weir serve --resp` as the built binary runs it, over real sockets: the
//! password file (`NOAUTH` until `AUTH`), the longest window, `--max-connections` on the
//! RESP listener, RESP decisions in `/metrics` as `api="resp"`, a client that pipelines
//! and never reads unable to keep the process up after SIGTERM, and mutual TLS with the
//! real `redis-cli --tls` (skipped, visibly, without it). Every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::io::{BufRead as _, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{spawn_logged_fields, terminate, Served};

const PASSWORD: &str = "a-resp-password-of-some-length";

/// `weir serve --resp 127.0.0.1:0 ARGS`, once it has logged both its HTTP and RESP
/// addresses: (the process, HTTP address, RESP address).
fn serve_resp(args: &[&str]) -> (Served, String, String) {
    let mut all = vec!["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    all.extend_from_slice(&["--resp", "127.0.0.1:0"]);
    all.extend_from_slice(args);
    let (served, mut addrs) = spawn_logged_fields(&all, &["http", "resp"], &[]);
    let resp = addrs.pop().unwrap();
    let http = addrs.pop().unwrap();
    (served, http, resp)
}

/// A RESP connection that reads whole replies of simple kinds.
struct Conn(BufReader<TcpStream>);

impl Conn {
    fn open(addr: &str) -> Conn {
        let socket = TcpStream::connect(addr).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Conn(BufReader::new(socket))
    }

    fn send(&mut self, words: &[&str]) {
        let mut request = format!("*{}\r\n", words.len());
        for w in words {
            request.push_str(&format!("${}\r\n{w}\r\n", w.len()));
        }
        self.0.get_mut().write_all(request.as_bytes()).unwrap();
    }

    fn line(&mut self) -> String {
        let mut line = String::new();
        self.0.read_line(&mut line).unwrap();
        line.trim_end().to_string()
    }

    /// One reply, an array's items joined by spaces.
    fn ask(&mut self, words: &[&str]) -> String {
        self.send(words);
        let first = self.line();
        match first.strip_prefix('*') {
            Some(n) => (0..n.parse::<usize>().unwrap())
                .map(|_| self.line())
                .collect::<Vec<_>>()
                .join(" "),
            None => first,
        }
    }
}

fn metrics(http: &str) -> String {
    let mut socket = TcpStream::connect(http).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    socket
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: weir\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut body = String::new();
    socket.read_to_string(&mut body).unwrap();
    body
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-cli-resp-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn resp_requires_the_password_and_keeps_the_servers_limits() {
    let dir = scratch("password");
    let password_file = dir.join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let (served, http, resp) = serve_resp(&[
        "--resp-password-file",
        password_file.to_str().unwrap(),
        "--max-connections",
        "2",
        "--header-read-timeout",
        "5s",
    ]);
    let mut a = Conn::open(&resp);
    assert_eq!(
        a.ask(&["CL.THROTTLE", "tenantA:user2", "0", "1", "60"]),
        "-NOAUTH Authentication required."
    );
    assert_eq!(a.ask(&["PING"]), "+PONG");
    assert_eq!(a.ask(&["AUTH", PASSWORD]), "+OK");
    let lockout = a.ask(&["CL.THROTTLE", "tenantA:user2", "0", "1", "315360000", "1"]);
    assert!(lockout.contains("longest window, 86400 s"), "{lockout}");
    assert_eq!(
        a.ask(&["CL.THROTTLE", "user123", "15", "30", "60"]),
        ":0 :16 :15 :-1 :2"
    );
    // --max-connections applies to the RESP listener.
    let mut b = Conn::open(&resp);
    assert_eq!(b.ask(&["PING"]), "+PONG");
    let mut c = Conn::open(&resp);
    assert_eq!(c.line(), "-ERR max number of clients reached");
    drop((b, c));
    // RESP decisions are in /metrics.
    let text = metrics(&http);
    assert!(
        text.contains(r#"weir_requests_total{api="resp",result="ok"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"weir_requests_total{api="resp",result="invalid"} 1"#),
        "{text}"
    );
    // A client that pipelines and never reads, until the server is stuck writing to it:
    // SIGTERM then stops the process anyway (the write timeout, --header-read-timeout,
    // closes that connection; before, the process stayed up until the client left).
    drop(a);
    let mut flood = Conn::open(&resp);
    flood.send(&["AUTH", PASSWORD]);
    let payload = "f".repeat(16 * 1024);
    let (stalled_tx, stalled) = mpsc::channel();
    let flooder = std::thread::spawn(move || {
        let mut request = format!("*2\r\n$4\r\nECHO\r\n${}\r\n", payload.len()).into_bytes();
        request.extend_from_slice(payload.as_bytes());
        request.extend_from_slice(b"\r\n");
        let socket = flood.0.get_mut();
        // A write that waits this long: the server has stopped reading.
        socket
            .set_write_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        let outcome = loop {
            match socket.write_all(&request) {
                Ok(()) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) =>
                {
                    break "stalled"
                }
                Err(_) => break "closed",
            }
        };
        let _ = stalled_tx.send(outcome);
        flood
    });
    assert_eq!(
        stalled.recv_timeout(Duration::from_secs(20)).unwrap(),
        "stalled",
        "the server stops reading a client that does not read"
    );
    let status = terminate(served);
    assert!(status.success(), "a clean stop on SIGTERM: {status:?}");
    drop(flooder.join().unwrap());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mutual TLS on RESP with the real `redis-cli --tls`.
#[test]
fn resp_over_mutual_tls_with_redis_cli() {
    let tls_cli = Command::new("redis-cli")
        .args(["--tls", "--version"])
        .output()
        .is_ok_and(|out| out.status.success());
    if !tls_cli {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED resp_over_mutual_tls_with_redis_cli: no redis-cli with --tls (apt-get install redis-tools)"
        );
        return;
    }
    let dir = scratch("tls");
    pki(&dir);
    let file = |name: &str| dir.join(name).display().to_string();
    let (served, _http, resp) = serve_resp(&[
        "--resp-tls-cert",
        &file("server.pem"),
        "--resp-tls-key",
        &file("server.key"),
        "--resp-tls-client-ca",
        &file("ca.pem"),
    ]);
    let port = resp.rsplit(':').next().unwrap().to_string();
    let cli = |extra: &[&str]| {
        let out = Command::new("redis-cli")
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &port,
                "--tls",
                "--cacert",
                &file("ca.pem"),
            ])
            .args(extra)
            .args(["CL.THROTTLE", "tls-user", "15", "30", "60"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
    };
    let with_cert = cli(&["--cert", &file("client.pem"), "--key", &file("client.key")]);
    assert_eq!(
        with_cert.split_whitespace().collect::<Vec<_>>(),
        ["0", "16", "15", "-1", "2"],
        "{with_cert}"
    );
    let without = cli(&[]);
    assert!(
        !without.contains("16"),
        "a client without a certificate was answered: {without}"
    );
    // Plaintext gets nothing either.
    let mut plain = TcpStream::connect(&resp).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    plain.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
    let mut buf = [0u8; 64];
    let n = plain.read(&mut buf).unwrap_or(0);
    assert!(!String::from_utf8_lossy(&buf[..n]).contains("PONG"));
    let status = terminate(served);
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files in `dir`.
fn pki(dir: &Path) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "weir resp test ca");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    for (who, names, usage) in [
        (
            "server",
            vec!["localhost".to_owned(), "127.0.0.1".to_owned()],
            ExtendedKeyUsagePurpose::ServerAuth,
        ),
        (
            "client",
            vec!["client".to_owned()],
            ExtendedKeyUsagePurpose::ClientAuth,
        ),
    ] {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(names).unwrap();
        params.distinguished_name.push(DnType::CommonName, who);
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca).unwrap();
        std::fs::write(dir.join(format!("{who}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{who}.key")), key.serialize_pem()).unwrap();
    }
}

/// The start-up WARN about the open-files limit counts the RESP listener: at 9000 open files
/// and `--max-connections 4000`, two listeners fit (8064) and three do not.
#[test]
fn the_open_files_warning_counts_the_resp_listener() {
    let warns = |resp: bool| {
        let weir = env!("CARGO_BIN_EXE_weir");
        let mut script = format!(
            "ulimit -n 9000 || exit 99; exec '{weir}' serve --http 127.0.0.1:0 --grpc 127.0.0.1:0 \
             --max-connections 4000 --log-format json"
        );
        if resp {
            script.push_str(" --resp 127.0.0.1:0");
        }
        let mut child = Command::new("sh")
            .args(["-c", &script])
            .env_remove("WEIR_ADMIN_TOKEN")
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut warned = None;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("open-files limit is below") {
                warned = Some(true);
            }
            if line.contains("weir serve: listening") {
                warned.get_or_insert(false);
                break;
            }
        }
        let _ = child.kill();
        let status = child.wait().unwrap();
        (warned, status.code())
    };
    let (without, code) = warns(false);
    if without.is_none() && code == Some(99) {
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED the_open_files_warning_counts_the_resp_listener: cannot raise ulimit -n to 9000"
        );
        return;
    }
    assert_eq!(
        without,
        Some(false),
        "two listeners of 4000 fit in 9000 files"
    );
    assert_eq!(warns(true).0, Some(true), "three do not");
}
