//! A raw HTTP/1 client for requests no well-behaved client sends (two Host headers, none,
//! broken chunked framing, a body that stops): bytes out, one parsed response in.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// One response as read off the socket.
#[derive(Debug)]
pub struct RawAnswer {
    pub status: u16,
    /// The head, lower-cased (for `contains` checks on header lines).
    pub head: String,
    pub body: String,
}

impl RawAnswer {
    /// Asserts the status, and that the body says `says`.
    pub fn expect(&self, status: u16, says: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert!(
            self.body.contains(says),
            "{:?} does not say {says:?}",
            self.body
        );
    }
}

/// Connects to `addr` and writes `request` (left open: the caller may still send more,
/// or never).
pub async fn open(addr: SocketAddr, request: &[u8]) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    stream
}

/// Reads one response (head, then a `Content-Length` body, or up to EOF without one),
/// failing the test after 10 s.
pub async fn read_answer(stream: &mut TcpStream) -> RawAnswer {
    tokio::time::timeout(Duration::from_secs(10), read(stream))
        .await
        .expect("a response within 10 s")
}

async fn read(stream: &mut TcpStream) -> RawAnswer {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "connection closed before a response head: {:?}",
            String::from_utf8_lossy(&buf)
        );
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {head:?}"));
    let length = head.lines().find_map(|line| {
        line.strip_prefix("content-length:")
            .map(|v| v.trim().parse::<usize>().unwrap())
    });
    let mut body = buf[head_end..].to_vec();
    match length {
        Some(length) => {
            while body.len() < length {
                let mut chunk = [0u8; 4096];
                let n = stream.read(&mut chunk).await.unwrap();
                assert!(n > 0, "connection closed mid-body");
                body.extend_from_slice(&chunk[..n]);
            }
            body.truncate(length);
        }
        None => {
            stream.read_to_end(&mut body).await.unwrap();
        }
    }
    RawAnswer {
        status,
        head,
        body: String::from_utf8_lossy(&body).into_owned(),
    }
}

/// Writes `request` on a new connection and reads the one response.
pub async fn exchange(addr: SocketAddr, request: &[u8]) -> RawAnswer {
    let mut stream = open(addr, request).await;
    read_answer(&mut stream).await
}
