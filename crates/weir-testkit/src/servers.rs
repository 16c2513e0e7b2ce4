//! Throwaway `redis-server` and `memcached` processes for store tests: each starts on a free
//! loopback port with its own temporary directory, answers before `start` returns, and is
//! killed when dropped. A Redis Cluster is several such servers joined by
//! `redis-cli --cluster create`. Never a mock: the tests talk to the real thing.
//!
//! A missing binary panics with the command that installs it (`scripts/test` does).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(10);

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

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

/// A `redis-server` on a free loopback port. Killed (SIGKILL) when dropped.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

impl RedisServer {
    /// A fresh, empty, non-persistent server.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `redis-server` arguments (e.g. `--cluster-enabled yes`).
    pub fn start_with(extra: &[&str]) -> Self {
        require("redis-server", "redis-server");
        let port = free_port();
        let mut server = Self {
            child: None,
            port,
            dir: scratch_dir("redis", port),
            extra: extra.iter().map(|s| (*s).to_owned()).collect(),
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        let port = self.port;
        wait_until(&format!("redis-server on port {port}"), || {
            ask(port, b"PING\r\n").is_some_and(|r| r.starts_with("+PONG"))
        });
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
        let port = free_port();
        let child = Command::new("memcached")
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
        let server = Self {
            child: Some(child),
            port,
        };
        wait_until(&format!("memcached on port {port}"), || {
            ask(port, b"version\r\n").is_some_and(|r| r.starts_with("VERSION"))
        });
        server
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
