//! Protocol upgrades through the proxy (`tunnel.rs`): a WebSocket handshake is counted by
//! the limits like any request, sent to the upstream with its `Upgrade` and `Connection:
//! upgrade`, and on `101` both sockets are joined; an upstream that declines is answered
//! as it answered; tunnels are bounded in number, closed when idle and at shutdown. An
//! `Upgrade` without `Connection: upgrade` is ignored (RFC 9110 §7.8). Real sockets: a raw
//! client, the proxy, and an upstream that speaks the handshake and upper-cases what it
//! is sent afterwards (so the bytes seen prove the upstream's side).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{proxy, settings};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use weir_proxy::ProxySettings;

const HANDSHAKE: &[u8] = b"GET /chat HTTP/1.1\r\nhost: weir.test\r\nconnection: Upgrade\r\n\
upgrade: websocket\r\nsec-websocket-version: 13\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";

/// The upstream: answers an upgrade to `/chat` with `101` and then echoes what it reads,
/// upper-cased, until the client closes; declines one to `/decline` with `426`; answers
/// anything else `200 plain`. Keeps every request head it read (lower-cased).
struct Upstream {
    addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

async fn upstream() -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let heads = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&heads);
    tokio::spawn(async move {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else {
                return;
            };
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let Some((head, _)) = read_head(&mut stream).await else {
                    return;
                };
                seen.lock().unwrap().push(head.clone());
                if head.starts_with("get /chat") && head.contains("upgrade: websocket") {
                    let answer = b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\
connection: Upgrade\r\nsec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
                    stream.write_all(answer).await.unwrap();
                    let mut buf = [0u8; 1024];
                    while let Ok(n @ 1..) = stream.read(&mut buf).await {
                        let upper = buf[..n].to_ascii_uppercase();
                        if stream.write_all(&upper).await.is_err() {
                            return;
                        }
                    }
                } else if head.starts_with("get /decline") {
                    let answer = b"HTTP/1.1 426 Upgrade Required\r\ncontent-length: 4\r\n\r\nnope";
                    let _ = stream.write_all(answer).await;
                } else {
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nplain";
                    let _ = stream.write_all(answer).await;
                }
            });
        }
    });
    Upstream { addr, heads }
}

impl Upstream {
    fn settings(&self, rules: &'static str) -> ProxySettings {
        settings(format!("http://{}", self.addr).parse().unwrap(), rules)
    }

    fn last_head(&self) -> String {
        self.heads
            .lock()
            .unwrap()
            .last()
            .cloned()
            .unwrap_or_default()
    }

    fn count(&self) -> usize {
        self.heads.lock().unwrap().len()
    }
}

/// Reads a head up to its blank line (lower-cased) and whatever came after it; `None` if
/// the connection closed first.
async fn read_head(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(i + 4);
            return Some((String::from_utf8_lossy(&buf).to_ascii_lowercase(), rest));
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(n @ 1..) => buf.extend_from_slice(&chunk[..n]),
            _ => return None,
        }
    }
}

/// Connects to the proxy, sends `request` and reads the answer's head (within 10 s).
async fn handshake(proxy: SocketAddr, request: &[u8]) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream.write_all(request).await.unwrap();
    let (head, rest) = tokio::time::timeout(Duration::from_secs(10), read_head(&mut stream))
        .await
        .expect("an answer within 10 s")
        .expect("an answer head");
    assert!(rest.is_empty() || !head.starts_with("http/1.1 101"));
    (stream, head)
}

/// Writes `text` into the tunnel and reads back what the upstream echoed.
async fn echo(stream: &mut TcpStream, text: &str) -> String {
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    while got.len() < text.len() {
        let mut buf = [0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf))
            .await
            .expect("the echo within 10 s")
            .unwrap();
        assert!(n > 0, "the tunnel closed");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8(got).unwrap()
}

/// Waits (at most 10 s) for the proxy to close `stream`.
async fn closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 64];
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the tunnel was not closed within 10 s");
}

#[tokio::test]
async fn a_websocket_handshake_is_tunnelled_both_ways() {
    let u = upstream().await;
    let p = proxy(u.settings("domain: proxy\n")).await;
    let (mut stream, head) = handshake(p.addr, HANDSHAKE).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert!(head.contains("upgrade: websocket"), "{head}");
    assert!(head.contains("connection: upgrade"), "{head}");
    assert!(head.contains("sec-websocket-accept: "), "{head}");

    // The upstream saw the handshake with the upgrade kept and this hop appended.
    let seen = u.last_head();
    assert!(seen.contains("upgrade: websocket"), "{seen}");
    assert!(seen.contains("connection: upgrade"), "{seen}");
    assert!(
        seen.contains("sec-websocket-key: dghlihnhbxbszsbub25jzq=="),
        "{seen}"
    );
    assert!(seen.contains("x-forwarded-for: 127.0.0.1"), "{seen}");

    assert_eq!(echo(&mut stream, "hello").await, "HELLO");
    assert_eq!(echo(&mut stream, "and again").await, "AND AGAIN");
    // The client closes its side: the upstream sees the end and closes, and so does the
    // tunnel.
    stream.shutdown().await.unwrap();
    closed(&mut stream).await;
}

#[tokio::test]
async fn an_upgrade_past_the_limit_is_429_and_never_reaches_the_upstream() {
    let u = upstream().await;
    let rules = "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: fixed_window, limit: 1, window: 1h}
";
    let p = proxy(u.settings(rules)).await;
    let (mut first, head) = handshake(p.addr, HANDSHAKE).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert_eq!(echo(&mut first, "one").await, "ONE");
    let (_, head) = handshake(p.addr, HANDSHAKE).await;
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert_eq!(
        u.count(),
        1,
        "the refused handshake never reached the upstream"
    );
}

#[tokio::test]
async fn an_upgrade_the_upstream_declines_is_answered_as_it_answered() {
    let u = upstream().await;
    let p = proxy(u.settings("domain: proxy\n")).await;
    let request = String::from_utf8(HANDSHAKE.to_vec())
        .unwrap()
        .replace("/chat", "/decline");
    let mut stream = TcpStream::connect(p.addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let answer = common::raw::read_answer(&mut stream).await;
    assert_eq!((answer.status, answer.body.as_str()), (426, "nope"));
}

#[tokio::test]
async fn an_upgrade_without_connection_upgrade_is_served_as_a_plain_request() {
    let u = upstream().await;
    let p = proxy(u.settings("domain: proxy\n")).await;
    let answer = common::raw::exchange(
        p.addr,
        b"GET /chat HTTP/1.1\r\nhost: weir.test\r\nupgrade: websocket\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!((answer.status, answer.body.as_str()), (200, "plain"));
    let seen = u.last_head();
    assert!(!seen.contains("upgrade"), "the Upgrade was dropped: {seen}");
}

#[tokio::test]
async fn an_idle_tunnel_is_closed() {
    let u = upstream().await;
    let mut s = u.settings("domain: proxy\n");
    s.tunnel_idle_timeout = Duration::from_millis(200);
    let p = proxy(s).await;
    let (mut stream, head) = handshake(p.addr, HANDSHAKE).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert_eq!(echo(&mut stream, "hi").await, "HI");
    // Nothing more either way: the proxy closes it after the idle timeout.
    closed(&mut stream).await;
}

#[tokio::test]
async fn tunnels_are_bounded_and_a_closed_one_frees_its_slot() {
    let u = upstream().await;
    let mut s = u.settings("domain: proxy\n");
    s.max_tunnels = 1;
    let p = proxy(s).await;
    let (mut first, head) = handshake(p.addr, HANDSHAKE).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert_eq!(echo(&mut first, "x").await, "X");

    let (_, head) = handshake(p.addr, HANDSHAKE).await;
    assert!(head.starts_with("http/1.1 503"), "{head}");
    assert_eq!(
        u.count(),
        1,
        "the refused upgrade never reached the upstream"
    );

    // Closed, the first tunnel gives its slot back (once both sides have closed: waited
    // for, at most 10 s).
    first.shutdown().await.unwrap();
    closed(&mut first).await;
    let mut opened = None;
    for _ in 0..200 {
        let (stream, head) = handshake(p.addr, HANDSHAKE).await;
        if head.starts_with("http/1.1 101") {
            opened = Some(stream);
            break;
        }
        assert!(head.starts_with("http/1.1 503"), "{head}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut again = opened.expect("a slot within 10 s of the first tunnel closing");
    assert_eq!(echo(&mut again, "y").await, "Y");
}

#[tokio::test]
async fn shutdown_closes_the_open_tunnels() {
    let u = upstream().await;
    let p = proxy(u.settings("domain: proxy\n")).await;
    let (mut stream, head) = handshake(p.addr, HANDSHAKE).await;
    assert!(head.starts_with("http/1.1 101"), "{head}");
    assert_eq!(echo(&mut stream, "bye").await, "BYE");
    p.stop.send(()).unwrap();
    closed(&mut stream).await;
    let stopped = tokio::time::timeout(Duration::from_secs(10), p.task).await;
    assert!(stopped.is_ok(), "the proxy stopped within 10 s");
}
