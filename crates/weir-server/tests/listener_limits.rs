//! The listeners' own bounds, over real sockets. Before them, idle gRPC connections were
//! kept for ever and neither listener capped its connections, so idle sockets used up the
//! process's file descriptors until `/healthz` timed out; and hyper read about 400 KB of
//! request headers. Now:
//! - each listener holds at most `max_connections`: one past the cap is closed at once,
//!   the open ones keep being served, and a freed slot is used again;
//! - a gRPC connection idle for `grpc_idle_timeout` is closed (GOAWAY), and one whose peer
//!   does not answer HTTP/2 pings is dropped after `grpc_keepalive_timeout`;
//! - request headers past `max_header_bytes` are a `431` (JSON).
//!
//! Timers are the server's own (hyper's and tokio's, on real time) with short settings;
//! the test waits for what the server does, every wait bounded.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use prost::Message as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use weir_core::{Clock as _, SystemClock};

use common::{bounded, descriptor, envoy_readme_dir, request, settings, TestServer};

/// How long any one wait for the server may take.
const WAIT: Duration = Duration::from_secs(10);

/// Reads one HTTP/1 response (head and `content-length` body) off a kept-alive
/// connection; `None` if the server closed it (or reset it) first.
async fn read_response(stream: &mut TcpStream) -> Option<String> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text[..end]
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |n| n.parse().unwrap());
            if seen.len() >= end + 4 + length {
                return Some(text);
            }
        }
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return (!seen.is_empty()).then_some(text),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// `GET /healthz` on a kept-alive connection: the response, or `None` if it was closed.
async fn healthz_on(stream: &mut TcpStream) -> Option<String> {
    // A write to a connection the server already closed may fail: the read says so.
    let _ = stream
        .write_all(b"GET /healthz HTTP/1.1\r\nhost: weir\r\n\r\n")
        .await;
    tokio::time::timeout(WAIT, read_response(stream))
        .await
        .expect("the server answers or closes")
}

/// A connection that `/healthz` was answered on, once the server serves one: connections
/// it closes at its cap are retried (one still closing, as the start-up check's may be,
/// frees its slot shortly).
async fn served_connection(addr: SocketAddr) -> TcpStream {
    tokio::time::timeout(WAIT, async {
        loop {
            let mut stream = TcpStream::connect(addr).await.unwrap();
            if let Some(answer) = healthz_on(&mut stream).await {
                assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
                return stream;
            }
        }
    })
    .await
    .expect("a connection is served within the cap")
}

/// A connection the server closes without a byte: EOF or a reset, within [`WAIT`].
async fn assert_closed_at_once(stream: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 64];
    let read = tokio::time::timeout(WAIT, stream.read(&mut buf))
        .await
        .unwrap_or_else(|_| panic!("{what}: the server neither answered nor closed"));
    match read {
        Ok(0) | Err(_) => {}
        Ok(n) => panic!(
            "{what}: served past the cap: {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
    }
}

/// An HTTP/2 client connection to the gRPC listener and the task driving it (it ends when
/// the server closes the connection: `Ok` after a GOAWAY).
async fn h2_connect(
    addr: SocketAddr,
) -> (
    SendRequest<Full<Bytes>>,
    JoinHandle<Result<(), hyper::Error>>,
) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (sender, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    (sender, tokio::spawn(connection))
}

/// One `ShouldRateLimit` call framed by hand; its `grpc-status`.
async fn should_rate_limit(sender: &mut SendRequest<Full<Bytes>>, addr: SocketAddr) -> String {
    let message = request("mongo_cps", vec![descriptor(&[("database", "users")])]).encode_to_vec();
    let mut body = vec![0u8];
    body.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    body.extend_from_slice(&message);
    let call = hyper::Request::post(format!(
        "http://{addr}/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
    ))
    .header("content-type", "application/grpc")
    .header("te", "trailers")
    .body(Full::new(Bytes::from(body)))
    .unwrap();
    let response = tokio::time::timeout(WAIT, sender.send_request(call))
        .await
        .expect("a gRPC answer")
        .unwrap();
    assert_eq!(response.status(), 200);
    let collected = response.into_body().collect().await.unwrap();
    let trailers = collected.trailers().cloned().unwrap_or_default();
    trailers["grpc-status"].to_str().unwrap().to_string()
}

/// The client preface and an empty SETTINGS frame: the start of any HTTP/2 connection.
const H2_START: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_connection_cap_new_connections_are_closed_and_open_ones_served() {
    bounded(async {
        let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
        settings.max_connections = NonZeroUsize::new(2).unwrap();
        let server = TestServer::start(settings).await;

        // HTTP: two connections held open (each answered once, so each is accepted).
        let mut first = served_connection(server.http).await;
        let second = served_connection(server.http).await;
        let mut third = TcpStream::connect(server.http).await.unwrap();
        let _ = third
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: weir\r\n\r\n")
            .await;
        assert_closed_at_once(&mut third, "HTTP").await;
        // The open ones keep working.
        assert!(healthz_on(&mut first)
            .await
            .unwrap()
            .starts_with("HTTP/1.1 200"));
        // A slot freed is taken again: once the server has seen `second` close, a new
        // connection is served.
        drop(second);
        served_connection(server.http).await;

        // gRPC: the same cap on its own listener.
        let (mut a, _a_conn) = h2_connect(server.grpc).await;
        let (mut b, _b_conn) = h2_connect(server.grpc).await;
        assert_eq!(should_rate_limit(&mut a, server.grpc).await, "0");
        assert_eq!(should_rate_limit(&mut b, server.grpc).await, "0");
        let mut third = TcpStream::connect(server.grpc).await.unwrap();
        let _ = third.write_all(H2_START).await;
        assert_closed_at_once(&mut third, "gRPC").await;
        assert_eq!(should_rate_limit(&mut a, server.grpc).await, "0");
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_grpc_connection_is_closed_with_a_goaway() {
    bounded(async {
        const IDLE: Duration = Duration::from_millis(300);
        let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
        settings.grpc_idle_timeout = IDLE;
        let server = TestServer::start(settings).await;
        let (mut sender, connection) = h2_connect(server.grpc).await;
        assert_eq!(should_rate_limit(&mut sender, server.grpc).await, "0");
        let clock = SystemClock::new(); // the server's timer runs on real time
        let answered = clock.now_ns();
        let closed = tokio::time::timeout(WAIT, connection)
            .await
            .expect("the server closes an idle gRPC connection")
            .unwrap();
        let waited = Duration::from_nanos(clock.now_ns() - answered);
        // Ok: the server said goodbye (GOAWAY) rather than dropping the socket.
        assert!(closed.is_ok(), "{closed:?}");
        assert!(
            waited >= IDLE - Duration::from_millis(50),
            "closed {waited:?} after the last answer, before the idle timeout of {IDLE:?}"
        );
        server.stop().await.unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grpc_peer_that_does_not_answer_pings_is_dropped() {
    bounded(async {
        let (mut settings, _clock) = settings(Some(&envoy_readme_dir()));
        settings.grpc_keepalive_interval = Duration::from_millis(200);
        settings.grpc_keepalive_timeout = Duration::from_millis(200);
        let server = TestServer::start(settings).await;
        let mut silent = TcpStream::connect(server.grpc).await.unwrap();
        silent.write_all(H2_START).await.unwrap();
        // Read frames until the server closes: acknowledge its SETTINGS, never a PING.
        let pings = tokio::time::timeout(WAIT, async {
            let mut pings = 0;
            let mut head = [0u8; 9];
            while silent.read_exact(&mut head).await.is_ok() {
                let length =
                    usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
                let mut payload = vec![0u8; length];
                if silent.read_exact(&mut payload).await.is_err() {
                    break;
                }
                let (kind, ack) = (head[3], head[4] & 1 == 1);
                if kind == 4 && !ack {
                    let _ = silent.write_all(b"\0\0\0\x04\x01\0\0\0\0").await;
                }
                if kind == 6 && !ack {
                    pings += 1;
                }
            }
            pings
        })
        .await
        .expect("the server drops a peer that does not answer its pings");
        assert!(pings >= 1, "closed without pinging first");
        server.stop().await.unwrap();
    })
    .await;
}

/// A request with one `x-big` header of `size` bytes and `connection: close`; the answer.
async fn get_with_header(server: &TestServer, size: usize) -> String {
    request_with_header(server, "GET /healthz", "", size).await
}

/// `line` (`METHOD /path`) with one `x-big` header of `size` bytes, `connection: close`
/// and `body` as JSON; the answer.
async fn request_with_header(server: &TestServer, line: &str, body: &str, size: usize) -> String {
    let mut stream = TcpStream::connect(server.http).await.unwrap();
    let content = if body.is_empty() {
        String::new()
    } else {
        format!(
            "content-type: application/json\r\ncontent-length: {}\r\n",
            body.len()
        )
    };
    let request = format!(
        "{line} HTTP/1.1\r\nhost: weir\r\nconnection: close\r\nx-big: {}\r\n{content}\r\n{body}",
        "a".repeat(size),
    );
    let _ = stream.write_all(request.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("the server answers and closes");
    String::from_utf8_lossy(&answer).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_headers_past_the_limit_are_a_431() {
    bounded(async {
        let (settings, _clock) = settings(None);
        let server = TestServer::start(settings).await;
        let small = get_with_header(&server, 8 * 1024).await;
        assert!(small.starts_with("HTTP/1.1 200"), "{small}");
        // Past 16 KiB: the router's JSON answer.
        let big = get_with_header(&server, 20 * 1024).await;
        assert!(big.starts_with("HTTP/1.1 431"), "{big}");
        assert!(big.contains("content-type: application/json"), "{big}");
        assert!(
            big.ends_with(
                r#"{"error":"the request headers are 20508 bytes, above the limit of 16384"}"#
            ),
            "{big}"
        );
        // Past twice that, hyper stops reading: its own 431, the connection closed.
        let huge = get_with_header(&server, 100 * 1024).await;
        assert!(huge.starts_with("HTTP/1.1 431"), "{huge}");
        // The server still answers.
        assert_eq!(server.get("/healthz").await.status, 200);
        server.stop().await.unwrap();
    })
    .await;
}

/// `POST /v1/check` is answered by the listener itself, not the router (`direct.rs`): the
/// same header limit, the same JSON answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_direct_check_route_has_the_routers_header_limit_and_answers() {
    bounded(async {
        let (settings, _clock) = settings(None);
        let server = TestServer::start(settings).await;
        let body = r#"{"domain":"d","descriptors":[{"entries":[{"key":"k","value":"v"}]}]}"#;
        let small = request_with_header(&server, "POST /v1/check", body, 8 * 1024).await;
        assert!(small.starts_with("HTTP/1.1 200"), "{small}");
        assert!(small.contains("content-type: application/json"), "{small}");
        let big = request_with_header(&server, "POST /v1/check", body, 20 * 1024).await;
        assert!(big.starts_with("HTTP/1.1 431"), "{big}");
        assert!(big.contains("content-type: application/json"), "{big}");
        // The GET's 20 508 bytes, and the content type and length: 28 + 16.
        assert!(
            big.ends_with(
                r#"{"error":"the request headers are 20552 bytes, above the limit of 16384"}"#
            ),
            "{big}"
        );
        // Another method on the same path is the router's: a JSON 405.
        let get = request_with_header(&server, "GET /v1/check", "", 10).await;
        assert!(get.starts_with("HTTP/1.1 405"), "{get}");
        assert!(get.contains("\"error\":"), "{get}");
        server.stop().await.unwrap();
    })
    .await;
}
