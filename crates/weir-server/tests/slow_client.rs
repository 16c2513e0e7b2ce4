//! Slow HTTP clients (slowloris): a client that never finishes its request headers is
//! disconnected after `header_read_timeout`, one whose body stalls is answered `408` after
//! `request_timeout`, one that reads none of its answers is disconnected after
//! `header_read_timeout`, over a real socket, while a client that sends a whole request on
//! the same server is answered. Real time here (hyper's own timer),
//! with a short timeout and every wait bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{bounded, settings, TestServer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use weir_core::{Clock as _, SystemClock};
use weir_testkit::slow_reader::{ended_by_the_server, send_without_reading};

const HEADER_READ_TIMEOUT: Duration = Duration::from_millis(300);

/// A server whose header-read timeout (and so its write-stall bound) is
/// [`HEADER_READ_TIMEOUT`].
async fn start() -> TestServer {
    let (mut settings, _clock) = settings(None);
    settings.header_read_timeout = HEADER_READ_TIMEOUT;
    TestServer::start(settings).await
}

/// Reads until the server closes the connection (or resets it); what it sent, if anything.
async fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return seen,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    bounded(async {
        let server = start().await;

        let clock = SystemClock::new(); // hyper's timer runs on real time
        let started = clock.now_ns();
        let mut slow = TcpStream::connect(server.http).await.unwrap();
        // A request line and one header, then nothing: the blank line never comes.
        slow.write_all(b"GET /healthz HTTP/1.1\r\nhost: weir\r\n")
            .await
            .unwrap();
        slow.flush().await.unwrap();

        // Meanwhile a complete request on the same server is answered.
        assert_eq!(server.get("/healthz").await.status, 200);

        let closed = tokio::time::timeout(Duration::from_secs(10), read_until_closed(&mut slow))
            .await
            .expect("the server closes a connection whose headers never end");
        let waited = Duration::from_nanos(clock.now_ns() - started);
        assert!(
            waited >= HEADER_READ_TIMEOUT,
            "closed after {waited:?}, before the {HEADER_READ_TIMEOUT:?} timeout"
        );
        // hyper may answer 408 before closing; it never answers the half request.
        let text = String::from_utf8_lossy(&closed);
        assert!(
            closed.is_empty() || text.starts_with("HTTP/1.1 408"),
            "unexpected answer to a half request: {text}"
        );
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_sends_nothing_is_dropped_too() {
    bounded(async {
        let server = start().await;
        let mut idle = TcpStream::connect(server.http).await.unwrap();
        let closed = tokio::time::timeout(Duration::from_secs(10), read_until_closed(&mut idle))
            .await
            .expect("the server closes a connection that never sends a request");
        assert!(closed.is_empty() || closed.starts_with(b"HTTP/1.1 408"));
        server.stop().await.unwrap();
    })
    .await;
}

/// A request whose body never arrives whole was answered `503` ("request took longer"),
/// as if the server had been slow: the client was, so it is `408 Request Timeout` (JSON,
/// like every error of the API), and the connection closes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_is_a_408() {
    bounded(async {
        let (mut settings, _clock) = settings(None);
        settings.request_timeout = Duration::from_millis(300);
        let server = TestServer::start(settings).await;
        let mut slow = TcpStream::connect(server.http).await.unwrap();
        // The whole head, then 10 of the 100 body bytes it announces.
        slow.write_all(
            b"POST /v1/check HTTP/1.1\r\nhost: weir\r\ncontent-type: application/json\r\n\
              content-length: 100\r\n\r\n{\"domain\":",
        )
        .await
        .unwrap();
        slow.flush().await.unwrap();
        let answer = tokio::time::timeout(Duration::from_secs(10), read_until_closed(&mut slow))
            .await
            .expect("the server answers and closes a request whose body stalls");
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
        assert!(text.contains("content-type: application/json"), "{text}");
        assert!(text.contains("connection: close"), "{text}");
        assert!(
            text.ends_with(r#"{"error":"the request body did not arrive within 300 ms"}"#),
            "{text}"
        );
        // Meanwhile a whole request on the same server is answered.
        assert_eq!(server.get("/healthz").await.status, 200);
        server.stop().await.unwrap();
    })
    .await;
}

/// A client that pipelines decisions on `/v1/check` (the listener's direct route) and reads
/// none of the answers is disconnected once the server's writes have made no progress for
/// `header_read_timeout`; the server keeps answering others and stops without waiting on
/// it. Before, the connection stayed open for as long as the client kept its socket.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_decisions_is_dropped() {
    bounded(async {
        let server = start().await;
        let body = r#"{"domain":"api","descriptors":[{"entries":[{"key":"remote_address","value":"10.0.0.1"}]}]}"#;
        let request = format!(
            "POST /v1/check HTTP/1.1\r\nhost: weir\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        let ended = tokio::time::timeout(
            Duration::from_secs(40),
            send_without_reading(server.http, request.as_bytes()),
        )
        .await
        .expect("the server disconnected the client that read nothing");
        assert!(ended_by_the_server(&ended), "{ended}");
        // Meanwhile a whole request on the same server is answered, and it stops at once.
        assert_eq!(server.get("/healthz").await.status, 200);
        server.stop().await.unwrap();
    })
    .await;
}
