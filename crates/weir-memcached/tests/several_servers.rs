//! Several memcached servers behind one store (the consistent-hash ring of the crate docs),
//! each a real `memcached` on a free loopback port: each key lives on exactly one server
//! with all its names, the conformance suite passes over three servers, instances that list
//! the servers in another order share every limit, `check_all` stays all-or-nothing across
//! servers, and a dead or silent server fails only its own keys, within the timeout, while
//! the others keep deciding exactly.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

use weir_core::{CheckError, Decision, Key, Op, Outcome, Rule, Store, StoreError};
use weir_memcached::{MemcachedStore, MemcachedStoreBuilder};
use weir_testkit::conformance;
use weir_testkit::servers::Memcached;
use weir_testkit::T0_NS;

const SECOND: Duration = Duration::from_secs(1);

fn three() -> [Memcached; 3] {
    [Memcached::start(), Memcached::start(), Memcached::start()]
}

fn addr(server: &Memcached) -> String {
    format!("127.0.0.1:{}", server.port())
}

/// A store over `addrs`, with a timeout that only a dead server reaches.
fn store(addrs: &[String], timeout: Duration) -> MemcachedStore {
    MemcachedStoreBuilder::default()
        .servers(addrs)
        .timeout(timeout)
        .build()
        .unwrap()
}

/// Whether the memcached on `port` holds `name` (a raw `get`, as another program would).
fn holds(port: u16, name: &str) -> bool {
    let mut conn = TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    conn.write_all(format!("get {name}\r\n").as_bytes())
        .unwrap();
    let mut reader = BufReader::new(conn);
    let mut found = false;
    loop {
        let mut line = Vec::new();
        reader.read_until(b'\n', &mut line).unwrap();
        let line = String::from_utf8(line).unwrap();
        if line == "END\r\n" {
            return found;
        }
        // `VALUE <name> <flags> <bytes>`, then the data (binary for a record) and CRLF.
        let bytes: usize = match line.strip_prefix("VALUE ") {
            Some(header) => header.split_whitespace().nth(2).unwrap().parse().unwrap(),
            None => panic!("memcached on {port} answered {line:?}"),
        };
        let mut data = vec![0u8; bytes + 2];
        reader.read_exact(&mut data).unwrap();
        found = true;
    }
}

/// The servers (indexes into `servers`) that hold `name`.
fn holders(servers: &[&Memcached], name: &str) -> Vec<usize> {
    (0..servers.len())
        .filter(|&i| holds(servers[i].port(), name))
        .collect()
}

/// The name of `key`'s fixed-window counter for the 1 s window around `T0_NS`.
fn counter_name(key: &str) -> String {
    let start = T0_NS - T0_NS % 1_000_000_000;
    format!("weir:f{start:x}:={key}")
}

/// The server that holds `key`'s counter (which must be on exactly one).
fn home(servers: &[&Memcached], key: &str) -> usize {
    match holders(servers, &counter_name(key)).as_slice() {
        [one] => *one,
        other => panic!("{key} is held by servers {other:?}"),
    }
}

async fn check(store: &MemcachedStore, key: &str, rule: &Rule) -> Result<bool, CheckError> {
    let key = Key::new(key).unwrap();
    match store
        .apply(
            weir_core::ScopedKey::plain(&key),
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

async fn used(store: &MemcachedStore, key: &str, rule: &Rule) -> u64 {
    let key = Key::new(key).unwrap();
    match store
        .apply(weir_core::ScopedKey::plain(&key), rule, Op::Inspect, T0_NS)
        .await
        .unwrap()
    {
        Outcome::Usage(usage) => usage.used,
        other => panic!("not a usage: {other:?}"),
    }
}

/// A check that must answer within 3 s whatever it answers (the store's timeout is less).
async fn bounded_check(store: &MemcachedStore, key: &str, rule: &Rule) -> Result<bool, CheckError> {
    tokio::time::timeout(Duration::from_secs(3), check(store, key, rule))
        .await
        .expect("the store's own timeout fires first")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_key_lives_on_one_server_with_all_its_names() {
    let servers = three();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let store = store(&servers.iter().map(addr).collect::<Vec<_>>(), 5 * SECOND);
    let fixed = Rule::fixed_window(5, SECOND).unwrap();
    let gcra = Rule::gcra(5, SECOND, 5).unwrap();
    let mut per_server = [0usize; 3];
    for i in 0..60 {
        // A counter, and its guard under the record name (a block writes it).
        let key = format!("spread:{i}");
        assert!(check(&store, &key, &fixed).await.unwrap());
        let block = Op::Block {
            duration_ns: 60_000_000_000,
        };
        store
            .apply(
                weir_core::ScopedKey::plain(&Key::new(key.as_str()).unwrap()),
                &fixed,
                block,
                T0_NS,
            )
            .await
            .unwrap();
        let at = home(&refs, &key);
        assert_eq!(holders(&refs, &format!("weir:r:={key}")), [at], "{key}");
        per_server[at] += 1;
        // A record algorithm: one name, on one server.
        let key = format!("record:{i}");
        assert!(check(&store, &key, &gcra).await.unwrap());
        assert_eq!(holders(&refs, &format!("weir:r:={key}")).len(), 1, "{key}");
    }
    // 60 keys on three servers of about a third each: none is left out.
    assert!(per_server.iter().all(|&n| n > 0), "{per_server:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_over_three_servers() {
    let servers = three();
    let store = MemcachedStoreBuilder::default()
        .servers(servers.iter().map(addr))
        .timeout(5 * SECOND)
        // The suite's clock is manual: a record it still holds may be seconds old in real
        // time, and memcached must not forget it (TESTING, "Flaky runs").
        .ttl_grace(Duration::from_secs(600))
        .build()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(180), conformance::run_all(&store))
        .await
        .expect("the suite finishes within three minutes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_listing_the_servers_in_another_order_share_each_limit() {
    let servers = three();
    let [a, b, c] = [addr(&servers[0]), addr(&servers[1]), addr(&servers[2])];
    let one = store(&[a.clone(), b.clone(), c.clone()], 5 * SECOND);
    // The same servers, listed in another order and as one URL.
    let other = MemcachedStore::builder(&format!("memcache://{c},{a},{b}"))
        .timeout(5 * SECOND)
        .build()
        .unwrap();
    for (rule, name) in [
        (Rule::fixed_window(4, SECOND).unwrap(), "fixed"),
        (Rule::gcra(4, SECOND, 4).unwrap(), "gcra"),
    ] {
        for i in 0..20 {
            let key = format!("order:{name}:{i}");
            let mut allowed = 0;
            for n in 0..10 {
                let store = if n % 2 == 0 { &one } else { &other };
                allowed += u64::from(check(store, &key, &rule).await.unwrap());
            }
            assert_eq!(allowed, 4, "{key}: both instances count on one server");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_all_is_all_or_nothing_across_servers() {
    let servers = three();
    let refs: Vec<&Memcached> = servers.iter().collect();
    let store = store(&servers.iter().map(addr).collect::<Vec<_>>(), 5 * SECOND);
    let (wide, narrow) = (
        Rule::fixed_window(5, SECOND).unwrap(),
        Rule::fixed_window(2, SECOND).unwrap(),
    );
    let mut spanned = 0;
    for i in 0..16 {
        let (a, b) = (format!("pair:a:{i}"), format!("pair:b:{i}"));
        let limits = [
            (Key::new(a.as_str()).unwrap(), wide),
            (Key::new(b.as_str()).unwrap(), narrow),
        ];
        let mut outcomes = Vec::new();
        for _ in 0..3 {
            let got = store
                .check_all(weir_core::ScopedLimits::plain(&limits), 1, T0_NS)
                .await
                .unwrap();
            outcomes.push(got.allowed);
        }
        assert_eq!(outcomes, [true, true, false], "pair {i}");
        // The denied third call charged neither, wherever each lives.
        assert_eq!(used(&store, &a, &wide).await, 2, "pair {i}");
        assert_eq!(used(&store, &b, &narrow).await, 2, "pair {i}");
        spanned += usize::from(home(&refs, &a) != home(&refs, &b));
    }
    // Sixteen pairs on three servers: most span two (each with odds 2/3).
    assert!(spanned > 0, "no pair spanned two servers");
}

fn is_clear_store_error(e: &CheckError) -> bool {
    match e {
        CheckError::Store(StoreError::Unavailable(msg)) => msg.contains("memcached"),
        CheckError::Store(StoreError::Timeout { .. }) => true,
        _ => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_fails_only_its_keys_and_the_others_keep_counting() {
    let mut servers = three();
    let addrs: Vec<String> = servers.iter().map(addr).collect();
    let store = store(&addrs, SECOND);
    let rule = Rule::fixed_window(3, SECOND).unwrap();
    let keys: Vec<String> = (0..30).map(|i| format!("dead:{i}")).collect();
    for key in &keys {
        assert!(check(&store, key, &rule).await.unwrap());
    }
    let homes: Vec<usize> = {
        let refs: Vec<&Memcached> = servers.iter().collect();
        keys.iter().map(|key| home(&refs, key)).collect()
    };
    let victim = homes[0];
    let on = |dead: bool| {
        keys.iter()
            .zip(&homes)
            .filter(move |(_, &h)| (h == victim) == dead)
            .map(|(key, _)| key.clone())
            .collect::<Vec<_>>()
    };
    let (lost, live) = (on(true), on(false));
    assert!(
        !live.is_empty(),
        "every key landed on one server: {homes:?}"
    );
    servers[victim].kill();

    for key in &lost {
        let err = bounded_check(&store, key, &rule).await.expect_err(key);
        assert!(is_clear_store_error(&err), "{key}: {err}");
        if let CheckError::Store(StoreError::Unavailable(msg)) = &err {
            assert!(
                msg.contains(&addrs[victim]),
                "{key}: names the server: {msg}"
            );
        }
    }
    // `check_all` over a dead and a live key fails before writing anything.
    let limits = [
        (Key::new(lost[0].as_str()).unwrap(), rule),
        (Key::new(live[0].as_str()).unwrap(), rule),
    ];
    let got = tokio::time::timeout(
        Duration::from_secs(3),
        store.check_all(weir_core::ScopedLimits::plain(&limits), 1, T0_NS),
    )
    .await
    .expect("no hang");
    assert!(got.is_err(), "{got:?}");
    assert_eq!(used(&store, &live[0], &rule).await, 1, "nothing charged");
    // The live servers' keys go on counting exactly: 1 used, 2 more, then denied.
    for key in &live {
        assert!(bounded_check(&store, key, &rule).await.unwrap(), "{key}");
        assert!(bounded_check(&store, key, &rule).await.unwrap(), "{key}");
        assert!(!bounded_check(&store, key, &rule).await.unwrap(), "{key}");
    }
    let ping = tokio::time::timeout(Duration::from_secs(3), store.ping())
        .await
        .expect("no hang");
    assert!(matches!(ping, Err(StoreError::Unavailable(_))), "{ping:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_server_times_out_only_its_keys() {
    let servers = [Memcached::start(), Memcached::start()];
    // Accepts connections (the kernel's backlog) and never replies.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut addrs: Vec<String> = servers.iter().map(addr).collect();
    addrs.push(silent.local_addr().unwrap().to_string());
    let store = store(&addrs, Duration::from_millis(200));
    let refs: Vec<&Memcached> = servers.iter().collect();
    let rule = Rule::fixed_window(3, SECOND).unwrap();
    let (mut timed_out, mut decided) = (0, 0);
    for i in 0..40 {
        let key = format!("silent:{i}");
        match bounded_check(&store, &key, &rule).await {
            Ok(allowed) => {
                assert!(allowed, "{key}");
                assert_eq!(holders(&refs, &counter_name(&key)).len(), 1, "{key}");
                decided += 1;
            }
            Err(err) => {
                assert_eq!(
                    err,
                    CheckError::Store(StoreError::Timeout { timeout_ms: 200 }),
                    "{key}"
                );
                assert!(holders(&refs, &counter_name(&key)).is_empty(), "{key}");
                timed_out += 1;
            }
        }
    }
    assert!(
        timed_out > 0 && decided > 0,
        "{timed_out} timed out, {decided} decided"
    );
}
