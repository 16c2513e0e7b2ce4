//! Graceful shutdown: once the stop signal comes, a request already being received is
//! still answered, new connections are refused, and `serve` returns.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, envoy_readme_dir, settings, TestServer};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_flight_request_finishes_after_the_stop_signal() {
    bounded(async {
        let (settings, _clock) = settings(Some(&envoy_readme_dir()));
        let server = TestServer::start(settings).await;
        let body = check_body("internal", &[("azure", "x")]);
        let (head, tail) = body.split_at(body.len() / 2);

        // Half a request: headers and half the body.
        let mut stream = TcpStream::connect(server.http).await.unwrap();
        let request = format!(
            "POST /v1/check HTTP/1.1\r\nhost: weir\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{head}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.unwrap();
        stream.flush().await.unwrap();
        // The server is handling it (waiting for the rest of the body).
        let metrics = std::sync::Arc::clone(server.app.engine().metrics());
        while metrics.http_in_flight() == 0 {
            tokio::task::yield_now().await;
        }

        let http = server.http;
        let stopping = tokio::spawn(server.stop());
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(!stopping.is_finished(), "serve waits for the request in flight");

        // The rest of the request: it is answered in full.
        stream.write_all(tail.as_bytes()).await.unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.contains("\"overall_code\":\"OK\""), "{answer}");

        stopping.await.unwrap().unwrap();
        assert!(TcpStream::connect(http).await.is_err(), "no longer accepting");
    })
    .await;
}
