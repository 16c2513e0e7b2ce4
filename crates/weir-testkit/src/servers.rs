//! Throwaway `redis-server` and `memcached` processes for store tests: each starts on a free
//! loopback port with its own temporary directory, answers before `start` returns, and is
//! killed when dropped. A Redis Cluster is several such servers joined by
//! `redis-cli --cluster create`. Never a mock: the tests talk to the real thing.
//! [`RedisTlsServer`] listens on TLS only and [`RedisSocketServer`] on a Unix socket only,
//! for `rediss://` and `unix://`.
//!
//! A missing binary panics with the command that installs it (`scripts/test` does).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::ports::free_port;

/// How long a server may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// How many ports a server is tried on before its start counts as failed (it exits at
/// once when another process took its port between choosing and binding).
const START_ATTEMPTS: usize = 5;

fn require(binary: &str, package: &str) {
    let found = Command::new(binary)
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(
        found,
        "{binary} not found: install it with `apt-get install -y {package}` \
         (scripts/test installs it when missing)"
    );
}

fn scratch_dir(what: &str, port: u16) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weir-{what}-{}-{port}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Sends one request line and reads the first reply, with a short timeout.
fn ask(port: u16, request: &[u8]) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream.write_all(request).ok()?;
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[allow(clippy::disallowed_methods)] // a real process's startup deadline, not a decision's clock
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < START_TIMEOUT,
            "{what} did not become ready within {START_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until `child` answers (`ready`), or returns `false` at once if it exited first
/// (e.g. its port was taken): the caller then tries another port.
#[allow(clippy::disallowed_methods)] // a real process's startup deadline, not a decision's clock
fn wait_ready(what: &str, child: &mut Child, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if ready() {
            return true;
        }
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        assert!(
            start.elapsed() < START_TIMEOUT,
            "{what} did not become ready within {START_TIMEOUT:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A `redis-server` on a free loopback port. Killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
    program: &'static str,
}

impl RedisServer {
    /// A fresh, empty, non-persistent server.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments (e.g. `--cluster-enabled yes`).
    pub fn start_with(extra: &[&str]) -> Self {
        require("redis-server", "redis-server");
        Self::start_program("redis-server", extra)
    }

    /// A server run by another program that takes `redis-server`'s arguments, such as
    /// `valkey-server` (the caller checks that it is installed).
    pub fn start_program(program: &'static str, extra: &[&str]) -> Self {
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let mut server = Self {
                child: None,
                port,
                dir: scratch_dir("redis", port),
                extra: extra.iter().map(|s| (*s).to_owned()).collect(),
                program,
            };
            if server.try_spawn() {
                return server;
            }
        }
        panic!("{program} did not start on any of {START_ATTEMPTS} ports");
    }

    fn spawn(&mut self) {
        let port = self.port;
        assert!(
            self.try_spawn(),
            "redis-server exited at start on port {port} (taken by another process?)"
        );
    }

    /// Starts the process on `self.port`; `false` if it exited before answering.
    fn try_spawn(&mut self) -> bool {
        let mut child = Command::new(self.program)
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let (port, program) = (self.port, self.program);
        let up = wait_ready(&format!("{program} on port {port}"), &mut child, || {
            ask(port, b"PING\r\n").is_some_and(|r| r.starts_with("+PONG"))
        });
        if up {
            self.child = Some(child);
        } else {
            let _ = child.wait();
        }
        up
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server at once (`kill -9`): the fault a store must survive.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// Sends one raw command line (e.g. `DEBUG SLEEP 1`) and returns the first reply.
    pub fn raw(&self, command: &str) -> Option<String> {
        ask(self.port, format!("{command}\r\n").as_bytes())
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster: `primaries` primaries with `replicas` replicas each, joined with
/// `redis-cli --cluster create`, ready (`cluster_state:ok`) when `start` returns.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Three primaries and three replicas.
    pub fn start() -> Self {
        Self::start_with(3, 1)
    }

    /// `primaries` primaries (at least 3) with `replicas` replicas each.
    pub fn start_with(primaries: usize, replicas: usize) -> Self {
        require("redis-cli", "redis-tools");
        let count = primaries * (1 + replicas);
        let nodes: Vec<RedisServer> = (0..count)
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for node in &nodes {
            create.arg(format!("127.0.0.1:{}", node.port()));
        }
        let status = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run redis-cli --cluster create");
        assert!(status.success(), "redis-cli --cluster create failed");
        let cluster = Self { nodes };
        for node in &cluster.nodes {
            wait_until("cluster_state:ok", || {
                node.raw("CLUSTER INFO")
                    .is_some_and(|r| r.contains("cluster_state:ok"))
            });
        }
        cluster
    }

    /// Every node, primaries first as created.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Mutable access, to kill or restart a node.
    pub fn nodes_mut(&mut self) -> &mut [RedisServer] {
        &mut self.nodes
    }

    /// `redis://127.0.0.1:{port}` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }
}

/// A `memcached` on a free loopback port. Killed when dropped.
#[derive(Debug)]
pub struct Memcached {
    child: Option<Child>,
    port: u16,
}

impl Memcached {
    /// A fresh memcached with 64 MiB.
    pub fn start() -> Self {
        require("memcached", "memcached");
        for _ in 0..START_ATTEMPTS {
            if let Some(server) = Self::try_start(free_port()) {
                return server;
            }
        }
        panic!("memcached did not start on any of {START_ATTEMPTS} ports");
    }

    /// Starts memcached on `port`; `None` if it exited before answering.
    fn try_start(port: u16) -> Option<Self> {
        let mut child = Command::new("memcached")
            .args([
                "-l",
                "127.0.0.1",
                "-p",
                &port.to_string(),
                "-U",
                "0",
                "-m",
                "64",
            ])
            .args(if is_root() {
                vec!["-u", "root"]
            } else {
                vec![]
            })
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn memcached");
        let up = wait_ready(&format!("memcached on port {port}"), &mut child, || {
            ask(port, b"version\r\n").is_some_and(|r| r.starts_with("VERSION"))
        });
        if !up {
            let _ = child.wait();
            return None;
        }
        Some(Self {
            child: Some(child),
            port,
        })
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `memcached://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("memcached://127.0.0.1:{}", self.port)
    }

    /// Kills it at once.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty (memcached keeps nothing across a restart).
    pub fn restart(&mut self) {
        self.kill();
        for _ in 0..START_ATTEMPTS {
            if let Some(mut fresh) = Self::try_start(self.port) {
                self.child = fresh.child.take();
                return;
            }
        }
        panic!("memcached did not restart on port {}", self.port);
    }

    /// How many items it holds now (`curr_items` of `stats`): which server a key went to
    /// is seen from outside as the server whose count grew.
    pub fn items(&self) -> u64 {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).expect("memcached answers");
        stream
            .set_read_timeout(Some(Duration::from_secs(2)))
            .expect("set a read timeout");
        let mut writer = stream.try_clone().expect("clone the stream");
        writer.write_all(b"stats\r\n").expect("send stats");
        let mut items = None;
        for line in BufReader::new(stream).lines() {
            let line = line.expect("read stats");
            if line == "END" {
                break;
            }
            if let Some(n) = line.strip_prefix("STAT curr_items ") {
                items = n.trim().parse().ok();
            }
        }
        items.expect("stats reports curr_items")
    }
}

impl Drop for Memcached {
    fn drop(&mut self) {
        self.kill();
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"))
}

/// The PEM files a TLS `redis-server` is started with: its certificate and key, and the CA
/// that client certificates must chain to.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The server's certificate chain (`--tls-cert-file`).
    pub cert: PathBuf,
    /// The server's private key (`--tls-key-file`).
    pub key: PathBuf,
    /// The CA of client certificates (`--tls-ca-cert-file`).
    pub ca: PathBuf,
}

/// Whether a TLS `redis-server` asks clients for a certificate (`--tls-auth-clients`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for.
    Off,
    /// A client without a certificate signed by the CA is refused (mutual TLS).
    Required,
}

/// A `redis-server` listening on TLS only (`--port 0 --tls-port`), on a free loopback port.
/// Killed when dropped. Ready once its log says so (no plaintext PING is possible).
#[derive(Debug)]
pub struct RedisTlsServer {
    /// Held for its `Drop`.
    _process: Process,
    port: u16,
}

impl RedisTlsServer {
    /// A fresh, empty, non-persistent server with these files. Panics if this
    /// `redis-server` was built without TLS.
    pub fn start(files: &TlsFiles, auth: ClientAuth) -> Self {
        require("redis-server", "redis-server");
        for _ in 0..START_ATTEMPTS {
            let port = free_port();
            let dir = scratch_dir("redis-tls", port);
            if let Some(child) = Self::try_spawn(port, &dir, files, auth) {
                return Self {
                    _process: Process { child, dir },
                    port,
                };
            }
            let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
            let _ = std::fs::remove_dir_all(&dir);
            assert!(
                !log.contains("not supported") && !log.contains("Bad directive"),
                "this redis-server cannot serve TLS:\n{log}"
            );
        }
        panic!("redis-server --tls-port did not start on any of {START_ATTEMPTS} ports");
    }

    fn try_spawn(
        port: u16,
        dir: &std::path::Path,
        files: &TlsFiles,
        auth: ClientAuth,
    ) -> Option<Child> {
        let log = dir.join("redis.log");
        let mut child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .args(["--tls-port", &port.to_string()])
            .arg("--tls-cert-file")
            .arg(&files.cert)
            .arg("--tls-key-file")
            .arg(&files.key)
            .arg("--tls-ca-cert-file")
            .arg(&files.ca)
            .args([
                "--tls-auth-clients",
                if auth == ClientAuth::Required {
                    "yes"
                } else {
                    "no"
                },
            ])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(dir)
            .arg("--logfile")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let up = wait_ready(
            &format!("redis-server on TLS port {port}"),
            &mut child,
            || {
                std::fs::read_to_string(&log)
                    .is_ok_and(|l| l.contains("Ready to accept connections"))
            },
        );
        if up {
            Some(child)
        } else {
            let _ = child.wait();
            None
        }
    }

    /// The port it listens on (TLS).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `rediss://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }
}

/// A `redis-server` listening on a Unix socket only (`--port 0 --unixsocket`), in a
/// temporary directory of its own. Killed when dropped.
#[derive(Debug)]
pub struct RedisSocketServer {
    process: Process,
}

impl RedisSocketServer {
    /// A fresh, empty, non-persistent server.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments (e.g. `--requirepass`).
    pub fn start_with(extra: &[&str]) -> Self {
        static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        require("redis-server", "redis-server");
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = scratch_dir("redis-sock", n);
        let socket = dir.join("redis.sock");
        let mut child = Command::new("redis-server")
            .args(["--port", "0"])
            .arg("--unixsocket")
            .arg(&socket)
            .args(["--unixsocketperm", "700"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        let up = wait_ready(
            &format!("redis-server on {}", socket.display()),
            &mut child,
            // -NOAUTH under --requirepass: answering all the same
            || ask_socket(&socket, b"PING\r\n").is_some_and(|r| r.starts_with(['+', '-'])),
        );
        assert!(up, "redis-server exited at start on {}", socket.display());
        Self {
            process: Process { child, dir },
        }
    }

    /// The socket's path.
    pub fn path(&self) -> PathBuf {
        self.process.dir.join("redis.sock")
    }

    /// `unix://{path}`.
    pub fn url(&self) -> String {
        format!("unix://{}", self.path().display())
    }

    /// Sends one raw command line (e.g. `DBSIZE`) and returns the first reply.
    pub fn raw(&self, command: &str) -> Option<String> {
        ask_socket(&self.path(), format!("{command}\r\n").as_bytes())
    }
}

/// A server process and its scratch directory, killed and removed when dropped.
#[derive(Debug)]
struct Process {
    child: Child,
    dir: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// [`ask`] over a Unix socket.
fn ask_socket(path: &std::path::Path, request: &[u8]) -> Option<String> {
    let stream = std::os::unix::net::UnixStream::connect(path).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    exchange(stream, request)
}

/// Writes `request` and reads the first reply.
fn exchange(mut stream: impl Read + Write, request: &[u8]) -> Option<String> {
    stream.write_all(request).ok()?;
    let mut reply = [0u8; 4096];
    let n = stream.read(&mut reply).ok()?;
    Some(String::from_utf8_lossy(&reply[..n]).into_owned())
}
