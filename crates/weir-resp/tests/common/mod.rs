//! Test harness: the RESP front end on a real loopback socket (127.0.0.1:0) over the
//! memory store and a `ManualClock`, a raw TCP client for exact bytes, and the `redis`
//! crate's client. Nothing sleeps: time moves only when a test advances the clock, and
//! every read waits for bytes (bounded by a generous timeout that only a hang reaches).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod app;

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use weir_core::ManualClock;
use weir_engine::{Engine, EngineSettings, RuleSource, SharedClock};
use weir_resp::Settings;

/// 2023-11-14T22:13:20Z, a whole second.
pub const START_NS: u64 = 1_700_000_000_000_000_000;

/// A hang, not a slow machine.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub struct Server {
    pub addr: SocketAddr,
    pub clock: ManualClock,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
}

pub async fn start() -> Server {
    start_with(RuleSource::Example, Settings::default()).await
}

pub async fn start_with(rules: RuleSource, settings: Settings) -> Server {
    let mut engine = EngineSettings::default();
    engine.rules = rules;
    start_engine(engine, settings).await.0
}

/// The front end over an engine built from `engine` (its clock replaced by the server's
/// manual clock; the memory store), returned too for reloads.
pub async fn start_engine(mut engine: EngineSettings, settings: Settings) -> (Server, Engine) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let clock = ManualClock::new(START_NS);
    engine.clock = SharedClock::new(clock.clone());
    let engine = Engine::open(engine).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(weir_resp::serve(
        listener,
        engine.clone(),
        settings,
        async {
            let _ = stopped.await;
        },
    ));
    let server = Server {
        addr,
        clock,
        stop: Some(stop),
        task,
    };
    (server, engine)
}

impl Server {
    /// Stops the server and waits until it has returned.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        tokio::time::timeout(PATIENCE, &mut self.task)
            .await
            .expect("the server stops")
            .unwrap();
    }

    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// A `redis` crate connection (RESP3 after `HELLO 3` when asked).
    pub async fn client(&self, resp3: bool) -> redis::aio::MultiplexedConnection {
        let proto = if resp3 { "?protocol=resp3" } else { "" };
        let client = redis::Client::open(format!("redis://{}/{proto}", self.addr)).unwrap();
        client.get_multiplexed_async_connection().await.unwrap()
    }

    /// A raw TCP connection.
    pub async fn raw(&self) -> Raw {
        Raw {
            stream: TcpStream::connect(self.addr).await.unwrap(),
            buffer: Vec::new(),
        }
    }
}

/// Encodes a command as a RESP multibulk request.
pub fn request(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n{arg}\r\n", arg.len()).as_bytes());
    }
    out
}

pub struct Raw {
    pub stream: TcpStream,
    buffer: Vec<u8>,
}

impl Raw {
    pub async fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.unwrap();
    }

    /// Sends one command and returns its reply's bytes (`expected_len` of them).
    pub async fn call(&mut self, args: &[&str]) -> String {
        self.send(&request(args)).await;
        self.line().await
    }

    /// The next `\r\n`-terminated line.
    pub async fn line(&mut self) -> String {
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\r\n") {
                let line: Vec<u8> = self.buffer.drain(..end + 2).collect();
                return String::from_utf8(line[..end].to_vec()).unwrap();
            }
            let mut chunk = [0u8; 4096];
            let n = tokio::time::timeout(PATIENCE, self.stream.read(&mut chunk))
                .await
                .expect("a reply in time")
                .unwrap();
            assert!(
                n > 0,
                "closed before a whole line; got {:?}",
                String::from_utf8_lossy(&self.buffer)
            );
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }

    /// Exactly `n` more bytes.
    pub async fn bytes(&mut self, n: usize) -> Vec<u8> {
        while self.buffer.len() < n {
            let mut chunk = [0u8; 65536];
            let read = tokio::time::timeout(PATIENCE, self.stream.read(&mut chunk))
                .await
                .expect("bytes in time")
                .unwrap();
            assert!(read > 0, "closed early");
            self.buffer.extend_from_slice(&chunk[..read]);
        }
        self.buffer.drain(..n).collect()
    }

    /// Everything until the server closes the connection.
    pub async fn until_closed(&mut self) -> String {
        loop {
            let mut chunk = [0u8; 4096];
            let read = tokio::time::timeout(PATIENCE, self.stream.read(&mut chunk))
                .await
                .expect("the server closes in time");
            match read {
                Ok(0) | Err(_) => break,
                Ok(n) => self.buffer.extend_from_slice(&chunk[..n]),
            }
        }
        String::from_utf8_lossy(&std::mem::take(&mut self.buffer)).into_owned()
    }
}

/// Runs a `redis` crate command expecting integers.
pub async fn ints(con: &mut redis::aio::MultiplexedConnection, args: &[&str]) -> Vec<i64> {
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query_async(con).await.unwrap()
}

// redis-cell: limit 5 (max_burst 4), Rate::per_second(1), key "foo".
// (offset ms, quantity, expected [limited, limit, remaining, retry_after, reset_after]):
// redis-cell's durations rounded as its lib.rs rounds them (3900 ms -> 4 s).
pub const CELL_TABLE: [(u64, &str, [i64; 5]); 15] = [
    (0, "6", [1, 5, 5, -1, 0]), // never more than the maximum
    (0, "1", [0, 5, 4, -1, 1]),
    (0, "1", [0, 5, 3, -1, 2]),
    (0, "1", [0, 5, 2, -1, 3]),
    (0, "1", [0, 5, 1, -1, 4]),
    (0, "1", [0, 5, 0, -1, 5]),
    (0, "1", [1, 5, 0, 1, 5]),
    (3000, "1", [0, 5, 2, -1, 3]),
    (3100, "1", [0, 5, 1, -1, 4]),
    (4000, "1", [0, 5, 1, -1, 4]),
    (8000, "1", [0, 5, 4, -1, 1]),
    (9500, "1", [0, 5, 4, -1, 1]),
    (9500, "0", [0, 5, 4, -1, 1]), // a zero quantity peeks
    (9500, "2", [0, 5, 2, -1, 3]), // a larger quantity uses more
    (9500, "5", [1, 5, 2, 3, 3]),  // and cannot exceed the limit
];
