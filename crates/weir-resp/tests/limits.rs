//! Issue 27: the front end's own limits, as on `weir serve`'s other listeners. A command
//! trickled in byte by byte is closed at its deadline (before, every read reset the idle
//! timer: 11.7 s of trickle was still answered); a client that pipelines and never reads
//! is closed by the write timeout and cannot hold shutdown up (before, the process stayed
//! up until the client left); the connection cap is the one configured; and decisions are
//! counted in `/metrics` as `api="resp"`.
//!
//! The trickle and the unread replies are attacks in time: the client paces its bytes
//! (tokio's timer) and every wait for the server is bounded by `PATIENCE`, which only the
//! old behaviour reaches.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::num::NonZeroUsize;
use std::time::Duration;

use common::{request, start_engine, start_with, PATIENCE};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weir_engine::{EngineSettings, RuleSource};
use weir_listen::ConnectionThreads;
use weir_resp::Settings;

#[tokio::test]
async fn a_trickled_command_is_closed_at_its_deadline() {
    let settings = Settings::default()
        .command_timeout(Duration::from_millis(300))
        .idle_timeout(Duration::from_secs(3600));
    let server = start_with(RuleSource::Example, settings).await;
    let mut raw = server.raw().await;
    // A whole command first: answered, and the connection stays open while idle.
    assert_eq!(raw.call(&["PING"]).await, "+PONG");
    let command = request(&["ECHO", &"x".repeat(400)]);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    let trickle = async {
        for (sent, byte) in command.iter().enumerate() {
            tick.tick().await;
            if raw.stream.write_all(&[*byte]).await.is_err() {
                return Some(sent);
            }
            let mut buf = [0u8; 64];
            match tokio::time::timeout(Duration::ZERO, raw.stream.read(&mut buf)).await {
                Ok(Ok(0)) | Ok(Err(_)) => return Some(sent),
                Ok(Ok(n)) => panic!("answered a trickled command: {:?}", &buf[..n]),
                Err(_) => {}
            }
        }
        None
    };
    let closed_after = tokio::time::timeout(PATIENCE, trickle)
        .await
        .expect("never closed");
    let sent = closed_after.expect("closed before the whole command was sent");
    assert!(
        sent < command.len() - 1,
        "{sent} of {} bytes",
        command.len()
    );
    server.stop().await;
}

#[tokio::test]
async fn a_client_that_never_reads_is_closed_and_cannot_hold_up_shutdown() {
    let settings = Settings::default()
        .write_timeout(Duration::from_millis(300))
        .shutdown_grace(Duration::from_secs(1));
    let server = start_with(RuleSource::Example, settings).await;
    let raw = server.raw().await;
    let (mut reader, mut writer) = raw.stream.into_split();
    // 16 KiB echoed per command, far more than the socket buffers hold, never read.
    let payload = "y".repeat(16 * 1024);
    let command = request(&["ECHO", &payload]);
    let flood = tokio::spawn(async move {
        for _ in 0..4096 {
            if writer.write_all(&command).await.is_err() {
                return;
            }
        }
    });
    // The server gives up on the connection: the flood's writes fail (or all went out and
    // the connection is closed regardless).
    tokio::time::timeout(PATIENCE, flood)
        .await
        .expect("the connection is closed while the client does not read")
        .unwrap();
    // What it did write is there, then the end.
    let mut buf = vec![0u8; 1 << 16];
    let drained = tokio::time::timeout(PATIENCE, async {
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(drained.is_ok(), "the server closed the connection");
    server.stop().await;
}

#[tokio::test]
async fn a_stalled_client_is_dropped_at_the_shutdown_grace() {
    stalled_client_is_dropped_at_the_grace(Settings::default()).await;
}

/// The same on a connection thread (`weir serve --connection-threads`), where the
/// connection is not a task of the accept loop's runtime: the grace still ends it.
#[tokio::test]
async fn a_stalled_client_on_a_connection_thread_is_dropped_at_the_shutdown_grace() {
    let threads = ConnectionThreads::start(NonZeroUsize::MIN, "resp-grace").unwrap();
    stalled_client_is_dropped_at_the_grace(Settings::default().connection_threads(threads)).await;
}

async fn stalled_client_is_dropped_at_the_grace(settings: Settings) {
    // A write timeout longer than the test's patience: only the grace can end it.
    let settings = settings
        .write_timeout(Duration::from_secs(3600))
        .shutdown_grace(Duration::from_millis(200));
    let server = start_with(RuleSource::Example, settings).await;
    let mut raw = server.raw().await;
    assert_eq!(raw.call(&["PING"]).await, "+PONG");
    let (_reader, mut writer) = raw.stream.into_split();
    let command = request(&["ECHO", &"z".repeat(16 * 1024)]);
    let mut sent = 0usize;
    // Pipeline until the server stops reading (its replies fill the socket buffers).
    loop {
        match tokio::time::timeout(Duration::from_secs(1), writer.write_all(&command)).await {
            Ok(Ok(())) => sent += 1,
            Ok(Err(_)) => panic!("closed before the shutdown"),
            Err(_) => break,
        }
        assert!(sent < 100_000, "the server never stopped reading");
    }
    // `Server::stop` waits at most PATIENCE for `serve` to return.
    server.stop().await;
}

#[tokio::test]
async fn connections_past_the_cap_are_refused() {
    let server = start_with(RuleSource::Example, Settings::default().max_connections(2)).await;
    let mut a = server.raw().await;
    let mut b = server.raw().await;
    assert_eq!(a.call(&["PING"]).await, "+PONG");
    assert_eq!(b.call(&["PING"]).await, "+PONG");
    let mut c = server.raw().await;
    assert_eq!(
        c.until_closed().await,
        "-ERR max number of clients reached\r\n"
    );
    let info = a.call(&["INFO", "stats"]).await;
    assert!(info.starts_with('$'), "{info}");
    let mut text = String::new();
    for _ in 0..4 {
        text.push_str(&a.line().await);
        text.push('\n');
    }
    assert!(text.contains("rejected_connections:1"), "{text}");
    server.stop().await;
}

/// The attack: a quarter of a million RESP commands left nothing in `/metrics`. Now each
/// decision counts as `api="resp"` (requests by result, their latency) and under its
/// command's rule name.
#[tokio::test]
async fn decisions_are_counted_as_api_resp() {
    let (server, engine) = start_engine(EngineSettings::default(), Settings::default()).await;
    let mut con = server.client(false).await;
    for _ in 0..3 {
        let _: Vec<i64> = redis::cmd("CL.THROTTLE")
            .arg("m")
            .arg(1)
            .arg(1)
            .arg(60)
            .query_async(&mut con)
            .await
            .unwrap();
    }
    let _: Vec<i64> = redis::cmd("THROTTLE")
        .arg("m")
        .arg(1)
        .arg(1)
        .arg(60)
        .query_async(&mut con)
        .await
        .unwrap();
    let bad: redis::RedisResult<Vec<i64>> = redis::cmd("CL.THROTTLE")
        .arg("m")
        .arg("x")
        .arg(1)
        .arg(60)
        .query_async(&mut con)
        .await;
    assert!(bad.is_err());
    let metrics = engine.render_metrics();
    let line = |needle: &str| {
        metrics
            .lines()
            .find(|l| l.starts_with(needle))
            .unwrap_or_else(|| panic!("no {needle} in\n{metrics}"))
            .to_string()
    };
    assert!(line(r#"weir_requests_total{api="resp",result="ok"}"#).ends_with(" 3"));
    assert!(line(r#"weir_requests_total{api="resp",result="over_limit"}"#).ends_with(" 1"));
    assert!(line(r#"weir_requests_total{api="resp",result="invalid"}"#).ends_with(" 1"));
    assert!(line(r#"weir_request_duration_seconds_count{api="resp"}"#).ends_with(" 5"));
    assert!(
        metrics.contains(r#"domain="resp",rule="cl.throttle",outcome="denied""#),
        "{metrics}"
    );
    assert!(
        metrics.contains(r#"domain="resp",rule="throttle""#),
        "{metrics}"
    );
    server.stop().await;
}
