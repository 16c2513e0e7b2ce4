//! Protocol upgrades through the proxy (a WebSocket, or any protocol but `h2c`): the last
//! step of an upgrade request, after the limits let it go ([`Forward`](crate::Forward)
//! sends it here instead of to the pool).
//!
//! - **Which requests**: HTTP/1.1 with `Connection: upgrade` and an `Upgrade` naming a
//!   protocol other than `h2c` ([`upgrade_of`]). RFC 9110 §7.8 has a server ignore an
//!   `Upgrade` without the `Connection` option or over HTTP/1.0: such a request is
//!   forwarded as a plain one, its `Upgrade` removed as a hop-by-hop header. An `h2c` offer
//!   is declined by ignoring it the same way.
//! - **How**: the request goes to the upstream on a connection of its own (never pooled,
//!   never reused), `Upgrade` and `Connection: upgrade` kept. If the upstream answers `101
//!   Switching Protocols`, the client gets that answer and both sockets are joined: bytes
//!   are copied both ways until both sides have closed, the tunnel has moved no byte
//!   either way for the tunnel idle timeout, or the proxy shuts down. Any other answer is
//!   passed on as it is.
//! - **Bounds**: at most `max_tunnels` are open at once; past that an upgrade is a `503`
//!   that never reaches the upstream. A tunnel leaves the listener's connection cap once
//!   upgraded, so this is its cap. Each holds two 16 KiB buffers (32 MiB at the default
//!   1024) and one task; a write the other side does not take within the idle timeout
//!   ends it as idle.
//! - **What a limit counts**: the upgrade request, once, like any request. An in-flight
//!   limit counts it until the `101`, not for the tunnel's life: `max_tunnels` bounds those.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http::header::{CONNECTION, UPGRADE};
use http::{HeaderMap, HeaderValue, Request, Version};
use hyper::upgrade::{OnUpgrade, Upgraded};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{watch, OwnedSemaphorePermit, Semaphore};

use crate::upstream::Upstream;

/// The bytes a tunnel reads at once from either side.
const CHUNK: usize = 16 * 1024;

/// The tunnels' shared state: how many may be open, how long one may idle, and the signal
/// that closes them all at shutdown.
#[derive(Debug)]
pub(crate) struct Tunnels {
    slots: Arc<Semaphore>,
    idle: Duration,
    closing: watch::Sender<bool>,
}

impl Tunnels {
    pub(crate) fn new(max: usize, idle: Duration) -> Self {
        Self {
            slots: Arc::new(Semaphore::new(max.clamp(1, Semaphore::MAX_PERMITS))),
            idle,
            closing: watch::Sender::new(false),
        }
    }

    /// A slot for one more tunnel, if there is room.
    pub(crate) fn slot(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.slots).try_acquire_owned().ok()
    }

    /// Closes every tunnel, now and to come.
    pub(crate) fn close_all(&self) {
        self.closing.send_replace(true);
    }

    /// Joins the client's socket and the upstream's once both upgrades complete, in a task
    /// of its own that holds `slot` until the tunnel ends.
    pub(crate) fn open(
        &self,
        client: OnUpgrade,
        upstream_side: OnUpgrade,
        slot: OwnedSemaphorePermit,
        ends: (Option<IpAddr>, Upstream),
    ) {
        let idle = self.idle;
        let mut closing = self.closing.subscribe();
        tokio::spawn(async move {
            let _slot = slot;
            let (peer, upstream) = ends;
            let (client, upstream_side) = match tokio::try_join!(client, upstream_side) {
                Ok(both) => both,
                Err(error) => {
                    tracing::debug!(?peer, %upstream, %error, "upgrade not completed");
                    return;
                }
            };
            let end = tokio::select! {
                end = relay(client, upstream_side, idle) => end,
                _ = closing.wait_for(|closing| *closing) => End::Shutdown,
            };
            tracing::debug!(?peer, %upstream, ?end, "tunnel closed");
        });
    }
}

/// Why a tunnel ended.
#[derive(Debug)]
enum End {
    /// Both sides closed (or one failed).
    Closed,
    /// No byte either way for the idle timeout.
    Idle,
    /// The proxy is stopping.
    Shutdown,
}

/// Copies bytes both ways until both sides have closed or nothing has moved for `idle`.
async fn relay(client: Upgraded, upstream: Upgraded, idle: Duration) -> End {
    let (mut client_reads, mut client_writes) = tokio::io::split(TokioIo::new(client));
    let (mut upstream_reads, mut upstream_writes) = tokio::io::split(TokioIo::new(upstream));
    let (mut up, mut down) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let (mut client_open, mut upstream_open) = (true, true);
    while client_open || upstream_open {
        // A write that cannot finish within `idle` (a peer that stopped reading) ends the
        // tunnel as idle, as a read would.
        let moved = tokio::select! {
            read = client_reads.read(&mut up), if client_open => match read {
                Ok(0) | Err(_) => {
                    client_open = false;
                    let _ = tokio::time::timeout(idle, upstream_writes.shutdown()).await;
                    Ok(())
                }
                Ok(n) => copy(&mut upstream_writes, &up[..n], idle).await,
            },
            read = upstream_reads.read(&mut down), if upstream_open => match read {
                Ok(0) | Err(_) => {
                    upstream_open = false;
                    let _ = tokio::time::timeout(idle, client_writes.shutdown()).await;
                    Ok(())
                }
                Ok(n) => copy(&mut client_writes, &down[..n], idle).await,
            },
            () = tokio::time::sleep(idle) => return End::Idle,
        };
        match moved {
            Ok(()) => {}
            Err(Stall::Idle) => return End::Idle,
            Err(Stall::Failed) => return End::Closed,
        }
    }
    End::Closed
}

/// Why a write did not finish.
enum Stall {
    Idle,
    Failed,
}

async fn copy(
    to: &mut (impl tokio::io::AsyncWrite + Unpin),
    bytes: &[u8],
    idle: Duration,
) -> Result<(), Stall> {
    match tokio::time::timeout(idle, to.write_all(bytes)).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(_)) => Err(Stall::Failed),
        Err(_) => Err(Stall::Idle),
    }
}

/// The `Upgrade` header of a request this proxy tunnels: HTTP/1.1, `Connection: upgrade`,
/// and an `Upgrade` naming a protocol other than `h2c` (an unreadable one counts).
pub(crate) fn upgrade_of<B>(request: &Request<B>) -> Option<HeaderValue> {
    if request.version() != Version::HTTP_11 {
        return None;
    }
    let headers = request.headers();
    let asked = headers.get_all(UPGRADE).iter().any(|value| {
        value.to_str().map_or(true, |value| {
            value
                .split(',')
                .map(|protocol| protocol.split('/').next().unwrap_or_default().trim())
                .any(|name| !name.is_empty() && !name.eq_ignore_ascii_case("h2c"))
        })
    });
    (asked && lists_upgrade(headers))
        .then(|| headers.get(UPGRADE).cloned())
        .flatten()
}

/// Whether the `Connection` header lists the `upgrade` option.
fn lists_upgrade(headers: &HeaderMap) -> bool {
    headers.get_all(CONNECTION).iter().any(|value| {
        value.to_str().is_ok_and(|value| {
            value
                .split(',')
                .any(|option| option.trim().eq_ignore_ascii_case("upgrade"))
        })
    })
}

/// Puts back the two headers an upgrade travels on, after the hop-by-hop ones were
/// removed: `Connection: upgrade` and the `Upgrade` given.
pub(crate) fn keep_upgrade(headers: &mut HeaderMap, upgrade: HeaderValue) {
    headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(UPGRADE, upgrade);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests state expectations by panicking

    use super::*;

    fn request(version: Version, headers: &[(&'static str, &'static str)]) -> Request<()> {
        let mut request = Request::builder().version(version).uri("/chat");
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.body(()).unwrap()
    }

    #[test]
    fn only_a_declared_http_1_1_upgrade_to_a_protocol_but_h2c_is_tunnelled() {
        let ws = [
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "websocket"),
        ];
        assert_eq!(
            upgrade_of(&request(Version::HTTP_11, &ws)).unwrap(),
            "websocket"
        );
        // No `Connection: upgrade`, HTTP/1.0, or h2c: ignored (RFC 9110 §7.8).
        assert!(upgrade_of(&request(Version::HTTP_11, &[("upgrade", "websocket")])).is_none());
        assert!(upgrade_of(&request(Version::HTTP_10, &ws)).is_none());
        let h2c = [
            ("connection", "Upgrade, HTTP2-Settings"),
            ("upgrade", "h2c"),
        ];
        assert!(upgrade_of(&request(Version::HTTP_11, &h2c)).is_none());
        assert!(upgrade_of(&request(Version::HTTP_11, &[("connection", "upgrade")])).is_none());
    }

    #[test]
    fn the_tunnels_are_bounded() {
        let tunnels = Tunnels::new(2, Duration::from_secs(1));
        let (a, b) = (tunnels.slot().unwrap(), tunnels.slot().unwrap());
        assert!(tunnels.slot().is_none(), "a third waits for a slot");
        drop(a);
        assert!(tunnels.slot().is_some());
        drop(b);
    }
}
