//! Many clients at once through the proxy's own upstream pool, with answers that arrive in
//! pieces: every request is answered whole and none hangs. The pool drives each upstream
//! connection from the client's task through a relay waker (`pool.rs`): a wake-up the
//! poll itself causes is polled for at once, one from the socket goes to the task. A
//! wake-up lost between the two would leave a request waiting for ever; here each of
//! 16 clients sends 25 requests in a row on kept-alive connections, with bodies of up to
//! 48 KiB, and the backend answers each in chunks with pauses between them, so answers
//! arrive both within a poll and from the socket later. Real sockets; bounded in time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::Router;
use bytes::Bytes;
use common::{client, proxy, send, settings};
use http_body_util::BodyExt as _;
use tokio::net::TcpListener;

/// A body of `chunks`, with a pause of `pause` before each one after the first.
struct Paced {
    chunks: Vec<Bytes>,
    pause: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl hyper::body::Body for Paced {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        if let Some(sleep) = &mut self.sleep {
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.sleep = None;
        }
        if self.chunks.is_empty() {
            return Poll::Ready(None);
        }
        let chunk = self.chunks.remove(0);
        if !self.chunks.is_empty() {
            let pause = self.pause;
            self.sleep = Some(Box::pin(tokio::time::sleep(pause)));
        }
        Poll::Ready(Some(Ok(hyper::body::Frame::data(chunk))))
    }
}

/// A backend that answers every request with its own body echoed back in 8 KiB chunks
/// (every third request with pauses of 1 ms between them).
async fn echo_backend() -> std::net::SocketAddr {
    let app = Router::new().fallback(|request: Request| async move {
        let paced = request.uri().path().ends_with("/paced");
        let body = request.into_body().collect().await.unwrap().to_bytes();
        let chunks: Vec<Bytes> = body.chunks(8 * 1024).map(Bytes::copy_from_slice).collect();
        let pause = if paced {
            Duration::from_millis(1)
        } else {
            Duration::ZERO
        };
        Body::new(Paced {
            chunks,
            pause,
            sleep: None,
        })
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_with_answers_in_pieces_are_all_answered_whole() {
    let backend = echo_backend().await;
    let upstream = format!("http://{backend}").parse().unwrap();
    let p = proxy(settings(upstream, "domain: proxy\n")).await;
    let addr = p.addr;
    let clients: Vec<_> = (0..16u32)
        .map(|c| {
            tokio::spawn(async move {
                let http = client();
                for r in 0..25u32 {
                    // 1 byte to 48 KiB, different for every request.
                    let len = 1 + (c * 7919 + r * 104_729) % (48 * 1024);
                    let letters = b"abcdefghijklmnopqrstuvwxyz";
                    let body: String = (0..len)
                        .map(|i| char::from(letters[((i + c + r) % 26) as usize]))
                        .collect();
                    let path = if r % 3 == 0 { "/echo/paced" } else { "/echo" };
                    let answer = send(&http, addr, "POST", path, &[], &body).await;
                    assert_eq!(answer.status, 200, "client {c}, request {r}");
                    assert_eq!(answer.body.len(), body.len(), "client {c}, request {r}");
                    assert!(answer.body == body, "client {c}, request {r}: another body");
                }
            })
        })
        .collect();
    let all = async {
        for client in clients {
            client.await.unwrap();
        }
    };
    tokio::time::timeout(Duration::from_secs(60), all)
        .await
        .expect("400 requests through the proxy answered within 60 s");
    p.stop.send(()).unwrap();
    p.task.await.unwrap().unwrap();
}
