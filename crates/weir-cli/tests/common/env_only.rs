//! `weir serve` started with envoyproxy/ratelimit's environment alone (the process
//! environment cleared), its log lines read as they come, and the gRPC request those tests
//! ask it: what `ratelimit_env.rs` and `ratelimit_runtime.rs` share. Every wait is bounded.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;

/// A `weir serve` process and its log lines, killed if the test fails before it stops.
pub struct Weir {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Drop for Weir {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Weir {
    /// `weir serve` with `env` only (the process environment cleared).
    pub fn start(env: &[(&str, String)]) -> Weir {
        let child = Command::new(env!("CARGO_BIN_EXE_weir"))
            .arg("serve")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let mut weir = Weir {
            child,
            lines,
            seen: Vec::new(),
        };
        let stderr = weir.child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        weir
    }

    /// The first log line holding `text`, read within 20 s (all lines read meanwhile are
    /// kept, so a line logged before the call is found too).
    pub fn wait_for(&mut self, text: &str) -> String {
        if let Some(line) = self.seen.iter().find(|l| l.contains(text)) {
            return line.clone();
        }
        loop {
            let line = self
                .lines
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| {
                    panic!("weir logs {text:?} within 20 s; it logged {:#?}", self.seen)
                });
            self.seen.push(line.clone());
            if line.contains(text) {
                return line;
            }
        }
    }

    /// Sends SIGTERM, waits for its "stopped" log line, then for its exit status.
    pub fn terminate(mut self) -> ExitStatus {
        super::sigterm(&self.child);
        self.wait_for("\"message\":\"stopped\"");
        self.child.wait().unwrap()
    }
}

/// A `ShouldRateLimit` request of one descriptor of `entries` in `domain`.
pub fn request(domain: &str, entries: &[(&str, &str)]) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_string(),
        descriptors: vec![RateLimitDescriptor {
            entries: entries
                .iter()
                .map(|(key, value)| Entry {
                    key: key.to_string(),
                    value: value.to_string(),
                })
                .collect(),
            ..RateLimitDescriptor::default()
        }],
        hits_addend: 0,
    }
}
