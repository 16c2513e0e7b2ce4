//! A throwaway Redis Sentinel (`redis-server <conf> --sentinel`) on a free loopback port,
//! watching one master, for the tests of stores deployed behind Sentinel (failover
//! included). Killed when dropped. Complements [`servers`](crate::servers), whose
//! `RedisServer` provides the master and its replicas.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a sentinel may take to answer after it is started.
const START_TIMEOUT: Duration = Duration::from_secs(10);

use crate::ports::free_port;

/// Sends one command line and reads the first reply, with a short timeout.
fn ask(port: u16, command: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_millis(500)))
        .ok()?;
    stream.write_all(format!("{command}\r\n").as_bytes()).ok()?;
    let mut buf = [0u8; 4096];
    let n = stream.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[allow(clippy::disallowed_methods)] // a real process's deadline, not a decision's clock
fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < timeout,
            "{what} did not happen within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A Redis Sentinel watching the master `name` at `127.0.0.1:master_port`, with a quorum
/// of 1 and fast failure detection (down after 1.5 s, failover timeout 3 s: quick, yet
/// slow enough that a loaded test machine does not fail over a live master).
#[derive(Debug)]
pub struct RedisSentinel {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisSentinel {
    /// Starts a sentinel and waits until it answers.
    pub fn start(name: &str, master_port: u16) -> Self {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("weir-sentinel-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch dir");
        let conf = dir.join("sentinel.conf");
        let text = format!(
            "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
             sentinel monitor {name} 127.0.0.1 {master_port} 1\n\
             sentinel down-after-milliseconds {name} 1500\n\
             sentinel failover-timeout {name} 3000\n\
             sentinel parallel-syncs {name} 1\n",
            dir = dir.display()
        );
        std::fs::write(&conf, text).expect("write sentinel.conf");
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn redis-server --sentinel (install redis-server)");
        let sentinel = Self {
            child: Some(child),
            port,
            dir,
        };
        wait_until(&format!("sentinel on port {port}"), START_TIMEOUT, || {
            ask(port, "PING").is_some_and(|r| r.starts_with("+PONG"))
        });
        sentinel
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port of the master it currently names for `name`.
    pub fn master_port(&self, name: &str) -> Option<u16> {
        let reply = ask(
            self.port,
            &format!("SENTINEL get-master-addr-by-name {name}"),
        )?;
        // *2\r\n$9\r\n127.0.0.1\r\n$4\r\n6379\r\n
        reply.lines().nth(4)?.trim().parse().ok()
    }

    /// Waits until the sentinel names a master other than `old_port` for `name`.
    pub fn wait_for_failover(&self, name: &str, old_port: u16, timeout: Duration) -> u16 {
        let mut new_port = old_port;
        wait_until("a sentinel failover", timeout, || {
            new_port = self.master_port(name).unwrap_or(old_port);
            new_port != old_port
        });
        new_port
    }

    /// Waits until the sentinel knows `count` replicas of `name`.
    pub fn wait_for_replicas(&self, name: &str, count: usize) {
        wait_until("the sentinel to see the replicas", START_TIMEOUT, || {
            ask(self.port, &format!("SENTINEL replicas {name}"))
                .and_then(|r| r.lines().next().map(str::to_owned))
                .is_some_and(|first| first.trim() == format!("*{count}"))
        });
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
