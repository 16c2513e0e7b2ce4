//! Faults: a memcached killed mid-test, one that accepts connections but never answers, and
//! values this store cannot read. Each call must fail quickly with a clear `StoreError`
//! (never hang or panic), and decisions must resume, on the same store, once a server
//! listens on that port again.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use weir_core::{CheckError, Decision, Key, Op, Outcome, Rule, Store, StoreError};
use weir_memcached::MemcachedStore;
use weir_testkit::servers::Memcached;
use weir_testkit::T0_NS;

/// A memcached started by hand on a given port, killed when dropped.
struct Restarted(Child);

impl Restarted {
    fn on(port: u16) -> Self {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0"));
        let mut cmd = Command::new("memcached");
        cmd.args(["-l", "127.0.0.1", "-p", &port.to_string(), "-U", "0"]);
        if root {
            cmd.args(["-u", "root"]);
        }
        let child = cmd
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("memcached is installed (apt-get install -y memcached)");
        Self(child)
    }
}

impl Drop for Restarted {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn check(store: &MemcachedStore, key: &Key, rule: &Rule) -> Result<bool, CheckError> {
    match store
        .apply(
            weir_core::ScopedKey::plain(key),
            rule,
            Op::Check { cost: 1 },
            T0_NS,
        )
        .await?
    {
        Outcome::Decision(Decision { allowed, .. }) => Ok(allowed),
        other => panic!("not a decision: {other:?}"),
    }
}

fn is_clear_store_error(e: &CheckError) -> bool {
    match e {
        CheckError::Store(StoreError::Unavailable(msg)) => msg.contains("memcached"),
        CheckError::Store(StoreError::Timeout { .. }) => true,
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_fast_and_a_new_one_on_its_port_takes_over() {
    let mut server = Memcached::start();
    let port = server.port();
    let store = MemcachedStore::builder(&server.url())
        .timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let s = Duration::from_secs(1);
    let limits = [
        (
            Key::new("faults:fixed").unwrap(),
            Rule::fixed_window(3, s).unwrap(),
        ),
        (
            Key::new("faults:gcra").unwrap(),
            Rule::gcra(3, s, 3).unwrap(),
        ),
    ];
    for (key, rule) in &limits {
        assert!(check(&store, key, rule).await.unwrap());
    }

    server.kill();
    for (key, rule) in &limits {
        // Every pooled connection is dead and the port refuses: an error, at once.
        for _ in 0..3 {
            let got = tokio::time::timeout(Duration::from_secs(2), check(&store, key, rule))
                .await
                .expect("no hang");
            let err = got.expect_err("the server is gone");
            assert!(is_clear_store_error(&err), "{err}");
        }
    }
    let ping = tokio::time::timeout(Duration::from_secs(2), store.ping())
        .await
        .expect("no hang");
    assert!(matches!(ping, Err(StoreError::Unavailable(_))), "{ping:?}");

    let _restarted = Restarted::on(port);
    let mut back = false;
    for _ in 0..200 {
        if store.ping().await.is_ok() {
            back = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await; // waits for a process, not time
    }
    assert!(back, "memcached restarted on port {port}");
    for (key, rule) in &limits {
        // A new, empty server: the same store decides again, from fresh state.
        for _ in 0..3 {
            assert!(check(&store, key, rule).await.unwrap());
        }
        assert!(!check(&store, key, rule).await.unwrap());
    }
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    // Accepts connections (the kernel's backlog) and never replies.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let store = MemcachedStore::builder(&addr.to_string())
        .timeout(Duration::from_millis(100))
        .build()
        .unwrap();
    let rule = Rule::per_second(5).unwrap();
    let key = Key::new("silent").unwrap();
    let got = tokio::time::timeout(Duration::from_secs(2), check(&store, &key, &rule))
        .await
        .expect("the store's own timeout fires first");
    assert_eq!(
        got,
        Err(CheckError::Store(StoreError::Timeout { timeout_ms: 100 }))
    );
    let ping = tokio::time::timeout(Duration::from_secs(2), store.ping())
        .await
        .expect("no hang");
    assert_eq!(ping, Err(StoreError::Timeout { timeout_ms: 100 }));
}

/// Stores `data` under `name` with a raw `set`, as another program might.
fn raw_set(port: u16, name: &str, data: &[u8]) {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    let mut request = format!("set {name} 0 60 {}\r\n", data.len()).into_bytes();
    request.extend_from_slice(data);
    request.extend_from_slice(b"\r\n");
    conn.write_all(&request).unwrap();
    let mut reply = [0u8; 8];
    conn.read_exact(&mut reply).unwrap();
    assert_eq!(&reply, b"STORED\r\n");
}

#[tokio::test]
async fn values_this_store_cannot_read_are_corrupt() {
    let server = Memcached::start();
    let store = MemcachedStore::builder(&server.url())
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let s = Duration::from_secs(1);
    raw_set(server.port(), "weir:r:=garbled", b"not a record");
    let gcra = Rule::gcra(5, s, 5).unwrap();
    let got = check(&store, &Key::new("garbled").unwrap(), &gcra).await;
    assert!(
        matches!(got, Err(CheckError::Store(StoreError::Corrupt(_)))),
        "{got:?}"
    );
    // A counter bucket that is not a number: every window of 1 s starting at T0's window.
    let window = T0_NS - T0_NS % 1_000_000_000;
    raw_set(
        server.port(),
        &format!("weir:f{window:x}:=words"),
        b"twelve",
    );
    let fixed = Rule::fixed_window(5, s).unwrap();
    let got = check(&store, &Key::new("words").unwrap(), &fixed).await;
    assert!(
        matches!(got, Err(CheckError::Store(StoreError::Corrupt(_)))),
        "{got:?}"
    );
}
