//! `INFO [section …]`, in Redis's format (`# Section` headers, `name:value` lines, CRLF),
//! with the sections clients read: `server` (`redis_version` is the Redis release whose
//! commands this front end answers like, for clients that check it; `weir_version` is
//! Weir's), `clients`, `persistence` (`loading:0`, what ioredis's ready check waits for),
//! `stats` and an empty `keyspace`. [`Stats`] holds the server-wide counters they show.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use weir_core::Clock as _;

use super::Shared;
use crate::protocol::Reply;

/// The Redis release `INFO` reports.
const REDIS_VERSION: &str = "7.2.0";

/// The sections in order, and whether `INFO` without arguments shows each.
const SECTIONS: [&str; 5] = ["server", "clients", "persistence", "stats", "keyspace"];

/// Counters of the whole front end.
#[derive(Debug)]
pub(crate) struct Stats {
    started_ns: u64,
    connected: AtomicU64,
    received: AtomicU64,
    rejected: AtomicU64,
    commands: AtomicU64,
    failed_auths: AtomicU64,
}

impl Stats {
    /// Counters from zero, the server started at `now_ns` (the engine's clock).
    pub(crate) fn new(now_ns: u64) -> Self {
        Self {
            started_ns: now_ns,
            connected: AtomicU64::new(0),
            received: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            commands: AtomicU64::new(0),
            failed_auths: AtomicU64::new(0),
        }
    }

    /// Connections accepted and not yet closed.
    pub(crate) fn connected(&self) -> u64 {
        self.connected.load(Ordering::Relaxed)
    }

    /// A connection was accepted; it counts as connected until [`Stats::closed`].
    pub(crate) fn opened(&self) {
        self.received.fetch_add(1, Ordering::Relaxed);
        self.connected.fetch_add(1, Ordering::Relaxed);
    }

    /// A connection counted by [`Stats::opened`] closed.
    pub(crate) fn closed(&self) {
        self.connected.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection was refused at the cap.
    pub(crate) fn rejected(&self) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
    }

    /// A command was run.
    pub(crate) fn command(&self) {
        self.commands.fetch_add(1, Ordering::Relaxed);
    }

    /// A wrong user or password was given.
    pub(crate) fn count_failed_auth(&self) {
        self.failed_auths.fetch_add(1, Ordering::Relaxed);
    }
}

/// `INFO [section …]`: `default`, `all` and `everything` name every section; an unknown
/// one adds nothing, as in Redis.
pub(crate) fn info(shared: &Shared, args: &[Bytes]) -> Reply {
    let wanted = |section: &str| {
        args.len() < 2
            || args[1..].iter().any(|a| {
                a.eq_ignore_ascii_case(section.as_bytes())
                    || a.eq_ignore_ascii_case(b"all")
                    || a.eq_ignore_ascii_case(b"default")
                    || a.eq_ignore_ascii_case(b"everything")
            })
    };
    let mut out = String::new();
    for section in SECTIONS.into_iter().filter(|s| wanted(s)) {
        if !out.is_empty() {
            out.push_str("\r\n");
        }
        out.push_str(&render(shared, section));
    }
    Reply::text(out)
}

fn render(shared: &Shared, section: &str) -> String {
    let stats = &shared.stats;
    let load = |n: &AtomicU64| n.load(Ordering::Relaxed);
    let now_ns = shared.engine.limiter().clock().now_ns();
    let uptime = now_ns.saturating_sub(stats.started_ns) / 1_000_000_000;
    let lines: Vec<(&str, String)> = match section {
        "server" => vec![
            ("redis_version", REDIS_VERSION.into()),
            ("redis_mode", "standalone".into()),
            ("weir_version", env!("CARGO_PKG_VERSION").into()),
            ("os", std::env::consts::OS.into()),
            ("arch_bits", (usize::BITS).to_string()),
            ("process_id", std::process::id().to_string()),
            ("uptime_in_seconds", uptime.to_string()),
            ("uptime_in_days", (uptime / 86_400).to_string()),
        ],
        "clients" => vec![
            ("connected_clients", load(&stats.connected).to_string()),
            ("maxclients", shared.settings.max_connections.to_string()),
            ("blocked_clients", "0".into()),
        ],
        "persistence" => vec![("loading", "0".into())],
        "stats" => vec![
            (
                "total_connections_received",
                load(&stats.received).to_string(),
            ),
            (
                "total_commands_processed",
                load(&stats.commands).to_string(),
            ),
            ("rejected_connections", load(&stats.rejected).to_string()),
            (
                "acl_access_denied_auth",
                load(&stats.failed_auths).to_string(),
            ),
        ],
        _ => Vec::new(),
    };
    let title = {
        let mut chars = section.chars();
        chars.next().map_or_else(String::new, |c| {
            c.to_ascii_uppercase().to_string() + chars.as_str()
        })
    };
    let mut text = format!("# {title}\r\n");
    for (name, value) in lines {
        text.push_str(name);
        text.push(':');
        text.push_str(&value);
        text.push_str("\r\n");
    }
    text
}
