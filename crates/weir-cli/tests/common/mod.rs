//! What the command-line tests share: running `weir`, starting a long-running command
//! (`serve`, `proxy`) with JSON logs and reading the address it logged, and stopping it with
//! SIGTERM; `env_only`: `weir serve` under envoyproxy/ratelimit's environment alone. Every
//! wait is bounded.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers

pub mod env_only;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub fn weir(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .env_remove("WEIR_ADMIN_TOKEN")
        .output()
        .unwrap()
}

pub fn repo(path: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
        .display()
        .to_string()
}

/// A backend for `weir proxy` on a thread, until the test ends, on a loopback port of
/// `weir_testkit::ports`, bound once (`free_listener`: no window for another process to
/// take the port between choosing and binding it, which failed one CI run): `200 backend` to every request, but `500 failed` to a path that
/// starts with `/fail` (an upstream failing, as a circuit breaker counts it). Its address.
pub fn backend() -> String {
    let listener = weir_testkit::ports::free_listener();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                let mut seen = Vec::new();
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        let failing = seen.starts_with(b"GET /fail");
                        seen.drain(..end + 4);
                        let reply: &[u8] = if failing {
                            b"HTTP/1.1 500 Internal Server Error\r\ncontent-length: 6\r\n\r\nfailed"
                        } else {
                            b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\n\r\nbackend"
                        };
                        if stream.write_all(reply).is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    addr
}

/// A running `weir` command and the address it logged.
pub struct Served {
    pub child: Child,
    pub http: String,
    /// What it logged up to the address (start-up WARNs among it).
    pub logs: Vec<String>,
    /// What it logs from then on, line by line.
    pub later: Option<mpsc::Receiver<String>>,
}

impl Served {
    /// The next log line (after the address) that contains `needle`, within 20 s.
    pub fn wait_log(&mut self, needle: &str) -> String {
        let later = self.later.as_ref().unwrap();
        loop {
            let line = later
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("no log line with {needle:?} within 20 s"));
            if line.contains(needle) {
                return line;
            }
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `weir serve` on ports the OS picks, with its HTTP address.
pub fn serve(args: &[&str]) -> Served {
    let mut all = vec!["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
    all.extend_from_slice(args);
    spawn_logged(&all, "http")
}

/// `weir ARGS --log-format json`, once it has logged `field` (an address).
pub fn spawn_logged(args: &[&str], field: &str) -> Served {
    spawn_logged_with_env(args, field, &[])
}

/// [`spawn_logged`] with environment variables set.
pub fn spawn_logged_with_env(args: &[&str], field: &str, env: &[(&str, &str)]) -> Served {
    spawn_logged_fields(args, &[field], env).0
}

/// `weir ARGS --log-format json` with `env`, once it has logged every one of `fields`
/// (addresses, on one line or on several): the process (its `http`, the first field's
/// address) and the addresses in the order of `fields`.
pub fn spawn_logged_fields(
    args: &[&str],
    fields: &[&str],
    env: &[(&str, &str)],
) -> (Served, Vec<String>) {
    let child = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(args)
        .args(["--log-format", "json"])
        .env_remove("WEIR_ADMIN_TOKEN")
        .envs(env.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Owned at once, so a failing test still kills it.
    let mut served = Served {
        child,
        http: String::new(),
        logs: Vec::new(),
        later: None,
    };
    let stderr = served.child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut found = vec![String::new(); fields.len()];
    while found.iter().any(String::is_empty) {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("weir logs {fields:?} within 20 s"));
        let event: serde_json::Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a log line that is not JSON ({e}): {line}"));
        for (slot, field) in found.iter_mut().zip(fields) {
            if let Some(addr) = event["fields"][*field].as_str() {
                *slot = addr.to_string();
            }
        }
        served.logs.push(line);
    }
    served.later = Some(rx);
    served.http.clone_from(&found[0]);
    (served, found)
}

/// Sends SIGTERM to `child`.
pub fn sigterm(child: &Child) {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
}

/// Sends SIGTERM and waits (at most 20 s) for the exit status.
pub fn terminate(mut served: Served) -> std::process::ExitStatus {
    sigterm(&served.child);
    for _ in 0..2000 {
        if let Some(status) = served.child.try_wait().unwrap() {
            return status;
        }
        std::thread::sleep(Duration::from_millis(10)); // a real process's exit, not rate-limit time
    }
    panic!("weir did not stop within 20 s of SIGTERM");
}

/// A CA (`ca.pem`), a server certificate for `server_name` (`server.pem`, `server.key`) and
/// a client certificate (`client.pem`, `client.key`) it signed, written into `dir`.
pub fn tls_files(dir: &Path, server_name: &str) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair,
    };
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(DnType::CommonName, "weir cli test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    for (who, name, usage) in [
        ("server", server_name, ExtendedKeyUsagePurpose::ServerAuth),
        ("client", "client", ExtendedKeyUsagePurpose::ClientAuth),
    ] {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(vec![name.to_owned()]).unwrap();
        params.extended_key_usages = vec![usage];
        let cert = params.signed_by(&key, &ca).unwrap();
        std::fs::write(dir.join(format!("{who}.pem")), cert.pem()).unwrap();
        std::fs::write(dir.join(format!("{who}.key")), key.serialize_pem()).unwrap();
    }
}
