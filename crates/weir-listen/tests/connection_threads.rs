//! Connections served on [`ConnectionThreads`]: each stays on one thread from accept to
//! close, new ones go to the thread holding the fewest, shutdown still lets a request in
//! flight finish (and a client still sending its head cannot hold it past the header-read
//! timeout), a client that reads none of its answers is disconnected after that timeout,
//! and a connection that panics leaves its thread serving the next.
//! Real sockets on loopback; every wait is for an answer or a signal, none for time, but for
//! the header-read timeout's own cut (300 ms, waited for with a bound of 20 s).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::convert::Infallible;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, Notify};
use weir_listen::{serve_service_with, ConnectionThreads, HttpLimits, Peer};
use weir_testkit::slow_reader::{ended_by_the_server, send_without_reading};

type Answer = axum::http::Response<Full<Bytes>>;

/// The name of the thread that answers: the body of every answer but `/panic`'s and
/// `/hold`'s (which waits for `release` first).
fn thread_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .to_string()
}

/// Sends one keep-alive request for `path` and reads its answer's body.
async fn get(stream: &mut TcpStream, path: &str) -> Option<String> {
    let request = format!("GET {path} HTTP/1.1\r\nhost: test\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut read = Vec::new();
    let mut buffer = [0u8; 1024];
    loop {
        let n = stream.read(&mut buffer).await.ok()?;
        if n == 0 {
            return None;
        }
        read.extend_from_slice(&buffer[..n]);
        let text = String::from_utf8_lossy(&read).to_string();
        let Some(end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length: usize = text[..end]
            .lines()
            .find_map(|line| {
                let (name, value) = line.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse().ok())?
            })
            .unwrap_or(0);
        if text.len() >= end + 4 + length {
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
            return Some(text[end + 4..end + 4 + length].to_string());
        }
    }
}

struct Server {
    addr: std::net::SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    served: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// A server on `threads` answering with its thread's name; `/hold` waits for `release`
/// (and says when it started on `held`), `/panic` panics.
async fn server(threads: ConnectionThreads, held: Arc<Notify>, release: Arc<Notify>) -> Server {
    server_with(threads, held, release, Duration::from_secs(10)).await
}

/// [`server`] with another header-read timeout.
async fn server_with(
    threads: ConnectionThreads,
    held: Arc<Notify>,
    release: Arc<Notify>,
    header_read_timeout: Duration,
) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let service = tower::service_fn(move |request: axum::http::Request<Incoming>| {
        let held = Arc::clone(&held);
        let release = Arc::clone(&release);
        async move {
            match request.uri().path() {
                "/panic" => panic!("a connection's service panicked (on purpose)"),
                "/hold" => {
                    held.notify_one();
                    release.notified().await;
                }
                _ => {}
            }
            Ok::<Answer, Infallible>(Answer::new(Full::new(Bytes::from(thread_name()))))
        }
    });
    let mut limits = HttpLimits::new(header_read_timeout);
    limits.threads = Some(threads);
    let (stop, stopped) = oneshot::channel::<()>();
    let served = tokio::spawn(serve_service_with(
        listener,
        service,
        limits,
        Peer::Unrecorded,
        async move {
            let _ = stopped.await;
        },
    ));
    Server {
        addr,
        stop: Some(stop),
        served,
    }
}

fn threads(count: usize, name: &str) -> ConnectionThreads {
    ConnectionThreads::start(NonZeroUsize::new(count).unwrap(), name).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_connection_stays_on_one_thread_and_new_ones_go_to_the_least_busy() {
    let threads = threads(2, "spread");
    assert_eq!(threads.count(), 2);
    let server = server(threads, Arc::default(), Arc::default()).await;
    let mut connections = Vec::new();
    let mut seen = Vec::new();
    for _ in 0..4 {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        // Answered once before the next connects: the accept loop has handed it over.
        seen.push(get(&mut stream, "/").await.unwrap());
        connections.push(stream);
    }
    for (stream, first) in connections.iter_mut().zip(&seen) {
        for _ in 0..3 {
            assert_eq!(
                &get(stream, "/").await.unwrap(),
                first,
                "a connection moved"
            );
        }
    }
    for name in &seen {
        assert!(
            name.starts_with("spread-"),
            "served by {name}, not a connection thread"
        );
    }
    let on_first = seen.iter().filter(|n| n.as_str() == "spread-0").count();
    assert_eq!(
        on_first, 2,
        "4 connections over 2 threads, the fewest first: {seen:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_a_request_in_flight_on_a_thread_finish() {
    let held = Arc::new(Notify::new());
    let release = Arc::new(Notify::new());
    let mut server = server(threads(2, "drain"), Arc::clone(&held), Arc::clone(&release)).await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    let answer = tokio::spawn(async move { get(&mut stream, "/hold").await });
    held.notified().await;
    let _ = server.stop.take().unwrap().send(());
    release.notify_one();
    let name = answer
        .await
        .unwrap()
        .expect("the request in flight was answered");
    assert!(name.starts_with("drain-"), "{name}");
    server.served.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_that_panics_leaves_its_thread_serving() {
    let only = threads(1, "survive");
    let server = server(only, Arc::default(), Arc::default()).await;
    let mut first = TcpStream::connect(server.addr).await.unwrap();
    assert_eq!(
        get(&mut first, "/panic").await,
        None,
        "the panicking connection closes"
    );
    let mut names = Vec::new();
    for _ in 0..2 {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        names.push(get(&mut stream, "/").await.unwrap());
    }
    assert_eq!(names, ["survive-0", "survive-0"]);
}

/// A client still sending its first request head when the server stops cannot hold the
/// shutdown past the header-read timeout: the timer's watcher keeps running through the
/// graceful close (it stopped with the stop signal, and the shutdown waited on the client
/// for as long as it kept the socket open).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_still_arriving_at_shutdown_is_cut_at_the_header_read_timeout() {
    let mut server = server_with(
        threads(2, "cut"),
        Arc::default(),
        Arc::default(),
        Duration::from_millis(300),
    )
    .await;
    let addr = server.addr;
    let mut slow = TcpStream::connect(addr).await.unwrap();
    slow.write_all(b"GET / HTTP/1.1\r\nhost: te").await.unwrap();
    // Answered after the slow one connected: the accept loop has taken the slow one too.
    let mut other = TcpStream::connect(addr).await.unwrap();
    assert!(get(&mut other, "/").await.is_some());
    drop(other);
    let _ = server.stop.take().unwrap().send(());
    tokio::time::timeout(Duration::from_secs(20), server.served)
        .await
        .expect("the shutdown ended: the slow head was cut at its timeout")
        .unwrap()
        .unwrap();
    // The slow client's socket was closed by the server, not left open.
    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(20), slow.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the server closed the slow connection");
}

/// A client that sends requests and never reads the answers is disconnected once the
/// server's writes have made no progress for the header-read timeout (before, it held its
/// connection, a task and the buffers for as long as it kept the socket open: a few such
/// sockets per `max_connections` would shut everyone else out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_reads_no_answers_is_disconnected_at_the_header_read_timeout() {
    let server = server_with(
        threads(1, "unread"),
        Arc::default(),
        Arc::default(),
        Duration::from_millis(300),
    )
    .await;
    // Requests until the server is stalled on answers this client never reads and so
    // stops reading requests; then the client's writes wait too. The server must end it.
    let ended = tokio::time::timeout(
        Duration::from_secs(30),
        send_without_reading(server.addr, b"GET / HTTP/1.1\r\nhost: test\r\n\r\n"),
    )
    .await
    .expect("the server disconnected the client that read nothing");
    assert!(ended_by_the_server(&ended), "{ended}");
}
