//! Loopback ports for the throwaway servers of [`servers`](crate::servers) and
//! [`sentinel`](crate::sentinel).
//!
//! A port from `bind(127.0.0.1:0)` comes from the kernel's ephemeral range (32768–60999 on
//! Linux), which caused two kinds of flaky start-up:
//! - about one port in five is above 55535, where a Cluster node cannot start (its bus port
//!   is the port + 10000); a six-node Cluster then failed to start most of the time;
//! - between choosing the port and the server binding it, any outgoing connection of the
//!   machine may take it as its source port.
//!
//! So ports are handed out from [`RANGE`], below the ephemeral range and below 55536: each
//! process starts at an offset of its own (test binaries may run side by side), walks the
//! range with a counter shared by its threads, and returns the first port it could bind.
//! A server that still loses its port to a race exits; the callers see that and start
//! again on the next port.

use std::net::TcpListener;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, Ordering};

/// The ports handed out: below Linux's ephemeral range, and low enough that a Cluster bus
/// port (port + 10000) is valid.
pub const RANGE: Range<u16> = 20_000..32_000;

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A loopback port that was free a moment ago, from [`RANGE`].
///
/// ```
/// let port = weir_testkit::ports::free_port();
/// assert!(weir_testkit::ports::RANGE.contains(&port));
/// ```
pub fn free_port() -> u16 {
    free_listener()
        .local_addr()
        .map_or(RANGE.start, |addr| addr.port())
}

/// A listener on a loopback port of [`RANGE`], bound here and kept: for a server in the
/// test's own process, which then has no window between choosing its port and binding it
/// (a [`free_port`] can be taken by another process before its server binds it).
///
/// ```
/// let listener = weir_testkit::ports::free_listener();
/// assert!(weir_testkit::ports::RANGE.contains(&listener.local_addr().unwrap().port()));
/// ```
pub fn free_listener() -> TcpListener {
    let span = u32::from(RANGE.end - RANGE.start);
    // Spread processes over the range so that two test binaries rarely walk the same ports.
    let offset = std::process::id().wrapping_mul(7919) % span;
    for _ in 0..span {
        let step = NEXT.fetch_add(1, Ordering::Relaxed);
        let index = offset.wrapping_add(step) % span;
        let port = RANGE.start + u16::try_from(index).unwrap_or(0);
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            return listener;
        }
    }
    panic!("no free loopback port in {RANGE:?}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_distinct_and_in_range() {
        let ports: Vec<u16> = (0..100).map(|_| free_port()).collect();
        assert!(ports.iter().all(|p| RANGE.contains(p) && *p <= 55_535));
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ports.len());
    }
}
