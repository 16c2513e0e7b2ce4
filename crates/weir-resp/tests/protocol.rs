//! The wire through real sockets: pipelining (the `redis` crate's pipelines and thousands
//! of commands in one write), RESP3 via `HELLO 3`, Redis's wording for unknown commands
//! and wrong arity, protocol errors answered then closed, the size limits refused from
//! the headers, the connection cap, `QUIT`, idle close, shutdown, and hostile bytes that
//! never take the server down.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{ints, request, start, start_with};
use redis::Value;
use tokio::io::AsyncWriteExt;
use weir_engine::RuleSource;
use weir_resp::Settings;

#[tokio::test]
async fn a_redis_pipeline_is_answered_in_order() {
    let server = start().await;
    let mut con = server.client(false).await;
    let mut pipe = redis::pipe();
    for _ in 0..20 {
        pipe.cmd("CL.THROTTLE").arg("p").arg(9).arg(1).arg(60);
    }
    pipe.cmd("PING");
    let (replies, pong): (Vec<Vec<i64>>, String) = {
        let mut all: Vec<Value> = pipe.query_async(&mut con).await.unwrap();
        let pong = all.pop().unwrap();
        let replies = all
            .into_iter()
            .map(|v| redis::from_redis_value(v).unwrap())
            .collect();
        (replies, redis::from_redis_value(pong).unwrap())
    };
    assert_eq!(pong, "PONG");
    for (i, reply) in replies.iter().enumerate() {
        let i = i64::try_from(i).unwrap();
        let expected = if i < 10 {
            [0, 10, 9 - i, -1, 60 * (i + 1)]
        } else {
            [1, 10, 0, 60, 600]
        };
        assert_eq!(reply[..], expected, "reply {i}");
    }
    server.stop().await;
}

#[tokio::test]
async fn thousands_of_commands_in_one_write_come_back_in_order() {
    let server = start().await;
    let mut raw = server.raw().await;
    let mut burst = Vec::new();
    let mut expected = Vec::new();
    for i in 0..5000 {
        let word = format!("w{i}");
        if i % 2 == 0 {
            burst.extend_from_slice(&request(&["ECHO", &word]));
        } else {
            burst.extend_from_slice(format!("ECHO {word}\r\n").as_bytes());
        }
        expected.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
    }
    raw.send(&burst).await;
    assert_eq!(raw.bytes(expected.len()).await, expected);
    server.stop().await;
}

#[tokio::test]
async fn a_command_sent_byte_by_byte_is_answered_once() {
    let server = start().await;
    let mut raw = server.raw().await;
    for byte in request(&["PING", "slow"]) {
        raw.send(&[byte]).await;
    }
    assert_eq!(raw.line().await, "$4");
    assert_eq!(raw.line().await, "slow");
    server.stop().await;
}

#[tokio::test]
async fn hello_3_switches_to_resp3_and_the_redis_crate_speaks_it() {
    let server = start().await;
    let mut raw = server.raw().await;
    raw.send(&request(&["HELLO", "3", "SETNAME", "me"])).await;
    assert_eq!(raw.line().await, "%7");
    let mut rest = Vec::new();
    while rest.last().is_none_or(|line| line != "*0") {
        rest.push(raw.line().await); // ends with "modules", an empty array
    }
    assert!(rest.windows(2).any(|w| w == ["$5", "proto"]), "{rest:?}");
    assert_eq!(raw.call(&["CLIENT", "GETNAME"]).await, "$2");
    assert_eq!(raw.line().await, "me");
    assert_eq!(raw.call(&["CLIENT", "SETNAME", ""]).await, "+OK");
    assert_eq!(raw.call(&["CLIENT", "GETNAME"]).await, "_", "a RESP3 null");
    assert_eq!(
        raw.call(&["HELLO", "4"]).await,
        "-NOPROTO unsupported protocol version"
    );

    let mut con = server.client(true).await;
    let hello: Value = redis::cmd("HELLO")
        .arg(3)
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(matches!(hello, Value::Map(_)), "{hello:?}");
    assert_eq!(
        ints(&mut con, &["CL.THROTTLE", "r3", "1", "1", "1"]).await,
        [0, 2, 1, -1, 1]
    );
    server.stop().await;
}

#[tokio::test]
async fn connection_commands_answer_as_redis_does() {
    let server = start().await;
    let mut con = server.client(false).await;
    let name: Option<String> = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(name, None);
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("weir-test")
        .query_async(&mut con)
        .await
        .unwrap();
    let name: String = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query_async(&mut con)
        .await
        .unwrap();
    assert_eq!(name, "weir-test");
    let _: () = redis::cmd("SELECT")
        .arg(0)
        .query_async(&mut con)
        .await
        .unwrap();
    let count: i64 = redis::cmd("COMMAND")
        .arg("COUNT")
        .query_async(&mut con)
        .await
        .unwrap();
    let all: Vec<Value> = redis::cmd("COMMAND").query_async(&mut con).await.unwrap();
    assert_eq!(usize::try_from(count).unwrap(), all.len());
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("cl.throttle")
        .query_async(&mut con)
        .await
        .unwrap();
    assert!(format!("{docs:?}").contains("max_burst"), "{docs:?}");

    let mut raw = server.raw().await;
    assert_eq!(raw.call(&["PING"]).await, "+PONG");
    assert_eq!(
        raw.call(&["FOO", "a", "b"]).await,
        "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' "
    );
    assert_eq!(
        raw.call(&["foo"]).await,
        "-ERR unknown command 'foo', with args beginning with: "
    );
    assert_eq!(
        raw.call(&["ECHO"]).await,
        "-ERR wrong number of arguments for 'echo' command"
    );
    assert_eq!(
        raw.call(&["PING", "a", "b"]).await,
        "-ERR wrong number of arguments for 'ping' command"
    );
    assert_eq!(
        raw.call(&["CLIENT", "SETNAME"]).await,
        "-ERR wrong number of arguments for 'client|setname' command"
    );
    assert_eq!(
        raw.call(&["SELECT", "1"]).await,
        "-ERR DB index is out of range"
    );
    assert_eq!(raw.call(&["CONFIG", "GET", "maxmemory"]).await, "*0");
    assert_eq!(raw.call(&["CONFIG", "GET", "appendonly"]).await, "*2");
    for expected in ["$10", "appendonly", "$2", "no"] {
        assert_eq!(raw.line().await, expected);
    }
    assert_eq!(raw.call(&["QUIT"]).await, "+OK");
    assert_eq!(raw.until_closed().await, "");
    server.stop().await;
}

#[tokio::test]
async fn protocol_violations_are_answered_then_the_connection_closes() {
    let settings = Settings::default()
        .max_args(8)
        .max_bulk_bytes(1024)
        .max_request_bytes(2048);
    let server = start_with(RuleSource::Example, settings).await;
    let cases: [(&[u8], &str); 5] = [
        (
            b"*1\r\n:1\r\n",
            "-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (
            b"*9\r\n",
            "-ERR Protocol error: 9 arguments, above the maximum of 8\r\n",
        ),
        (
            b"*1\r\n$1025\r\n",
            "-ERR Protocol error: an argument of 1025 bytes, above the maximum of 1024\r\n",
        ),
        (
            b"*x\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-1\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
    ];
    for (input, answer) in cases {
        let mut raw = server.raw().await;
        // A good command first: answered, then the violation closes the connection.
        let mut bytes = request(&["PING"]);
        bytes.extend_from_slice(input);
        raw.send(&bytes).await;
        assert_eq!(raw.until_closed().await, format!("+PONG\r\n{answer}"));
    }
    // Two arguments of 1 KiB each exceed 2 KiB for one command.
    let mut raw = server.raw().await;
    let big = "x".repeat(1024);
    raw.send(&request(&["ECHO", &big, &big])).await;
    assert_eq!(
        raw.until_closed().await,
        "-ERR Protocol error: a command of more than 2048 bytes\r\n"
    );
    server.stop().await;
}

#[tokio::test]
async fn hostile_bytes_never_take_the_server_down() {
    let server = start().await;
    let inputs: [&[u8]; 8] = [
        b"\x00\x01\x02\xff\r\n",
        b"*99999999999999999999\r\n",
        b"*2\r\n$99999999999999999999\r\n",
        b"*-5\r\n*0\r\n\r\n\r\n",
        &[b'*'; 70_000],
        b"$5\r\nhello\r\n",
        b"CL.THROTTLE \xff\xfe 1 1 1\r\nTHROTTLE \xff 1 1 1\r\nWEIR.CHECK \xff k v\r\n",
        b"*3\r\n$10\r\nWEIR.CHECK\r\n$3\r\napi\r\n$4\r\nHITS\r\n",
    ];
    for input in inputs {
        let mut raw = server.raw().await;
        raw.send(input).await;
        raw.stream.shutdown().await.ok();
        raw.until_closed().await;
    }
    let mut raw = server.raw().await;
    assert_eq!(raw.call(&["PING"]).await, "+PONG");
    server.stop().await;
}

#[tokio::test]
async fn one_connection_past_the_cap_is_refused_as_redis_refuses_it() {
    let server = start_with(RuleSource::Example, Settings::default().max_connections(1)).await;
    let mut first = server.raw().await;
    assert_eq!(first.call(&["PING"]).await, "+PONG");
    let mut second = server.raw().await;
    assert_eq!(
        second.until_closed().await,
        "-ERR max number of clients reached\r\n"
    );
    drop(first);
    server.stop().await;
}

#[tokio::test]
async fn an_idle_connection_is_closed() {
    let settings = Settings::default().idle_timeout(Duration::from_millis(50));
    let server = start_with(RuleSource::Example, settings).await;
    let mut raw = server.raw().await;
    assert_eq!(raw.call(&["PING"]).await, "+PONG");
    assert_eq!(raw.until_closed().await, "");
    server.stop().await;
}

#[tokio::test]
async fn shutdown_closes_open_connections_and_returns() {
    let server = start().await;
    let mut raw = server.raw().await;
    assert_eq!(raw.call(&["PING"]).await, "+PONG");
    server.stop().await;
    assert_eq!(raw.until_closed().await, "");
}
