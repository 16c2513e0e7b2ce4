//! The in-flight limit of `weir proxy` on real sockets: the adaptive limit (`--max-in-flight
//! auto`) in front of a real backend on loopback that collapses past its knee, and
//! priority shedding (crawlers before readers) in front of a backend the test holds and
//! releases. Readiness is read from the proxy's own `/metrics`; the dashboard's `in_flight`
//! panel (`/dashboard/data`) is checked against it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use common::{client, dashboard, get, proxy, settings, TOKEN};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use weir_core::adaptive::{AdaptiveSettings, Knee};
use weir_listen::AdminToken;
use weir_tower::InFlightLimit;

const OPEN: &str = "domain: proxy\n";
const GOOGLEBOT: &[(&str, &str)] = &[("user-agent", "Googlebot/2.1")];
const FIREFOX: &[(&str, &str)] = &[("user-agent", "Mozilla/5.0 Firefox/128.0")];

/// A backend on loopback: every request waits its turn at `gate` (none: goes at once),
/// then takes the knee model's latency for the requests inside when it came in.
struct Backend {
    addr: SocketAddr,
    inside: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

/// One request inside the backend; leaves however it ends (a cancelled one too).
struct Inside(Arc<AtomicUsize>);

impl Drop for Inside {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

async fn backend(knee: Knee, gate: Option<Arc<Semaphore>>) -> Backend {
    let inside = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (i, p) = (Arc::clone(&inside), Arc::clone(&peak));
    let app = Router::new().fallback(move || {
        let (inside, peak, gate) = (Arc::clone(&i), Arc::clone(&p), gate.clone());
        async move {
            let n = inside.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(n, Ordering::SeqCst);
            let _inside = Inside(inside);
            if let Some(gate) = gate {
                gate.acquire().await.unwrap().forget();
            }
            tokio::time::sleep(knee.latency(n)).await;
            "done"
        }
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Backend { addr, inside, peak }
}

/// The value of a sample line of the proxy's `/metrics` (`None`: not there).
async fn metric(api: SocketAddr, line: &str) -> Option<f64> {
    let text = get(&client(), api, "/metrics", &[]).await.body;
    text.lines()
        .find_map(|l| l.strip_prefix(line)?.strip_prefix(' ')?.parse().ok())
}

/// Waits until `line` on `/metrics` reads `value`.
async fn until_metric(api: SocketAddr, line: &str, value: f64) {
    for _ in 0..500 {
        if metric(api, line).await == Some(value) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{line} never read {value}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_finds_a_collapsing_backends_knee_and_keeps_it_there() {
    let knee = Knee {
        knee: 4,
        base: Duration::from_millis(20),
    };
    let b = backend(knee, None).await;
    let mut s = settings(format!("http://{}", b.addr).parse().unwrap(), OPEN);
    let adaptive = AdaptiveSettings {
        min_rtt_requests: 10,
        ..AdaptiveSettings::default()
    };
    s.in_flight = Some(InFlightLimit::adaptive(adaptive, 256, Duration::from_secs(5)).unwrap());
    s.server.admin_token = Some(AdminToken::new(TOKEN).unwrap());
    let p = proxy(s).await;
    // 32 clients, each sending its next request as soon as the last is answered, for 40
    // rounds: eight times the backend's knee, all the time.
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let addr = p.addr;
        tasks.push(tokio::spawn(async move {
            let c = client();
            let mut codes = Vec::new();
            for _ in 0..40 {
                codes.push(get(&c, addr, "/", FIREFOX).await.status);
            }
            codes
        }));
    }
    let mut codes = Vec::new();
    for t in tasks {
        codes.extend(t.await.unwrap());
    }
    assert!(
        codes.iter().all(|&c| c == 200),
        "all wait their turn: {codes:?}"
    );
    // Far below the 32 offered. Not "at most 3x the knee": on a loaded host one stalled
    // request in a minimum-RTT measurement makes the minimum long, and the gradient then
    // lets the limit climb for a window or two before the next measurement (15 seen at a
    // load of 12). The controller's exact moves are pinned under the manual clock
    // (weir-core's adaptive tests); this test pins what real sockets must show.
    let peak = b.peak.load(Ordering::SeqCst);
    assert!(
        peak <= 20,
        "the backend never had 32 inside, at most {peak}"
    );
    let limit = metric(p.api, "weir_proxy_in_flight_limit").await.unwrap();
    assert!(
        (2.0..=10.0).contains(&limit),
        "the limit is near the knee of 4: {limit}"
    );
    let min_rtt = metric(p.api, "weir_proxy_min_rtt_seconds").await.unwrap();
    assert!(
        (0.019..0.060).contains(&min_rtt),
        "the unloaded latency is about 20 ms: {min_rtt}"
    );
    let sample_rtt = metric(p.api, "weir_proxy_sample_rtt_seconds")
        .await
        .unwrap();
    assert_eq!(b.inside.load(Ordering::SeqCst), 0);

    // The dashboard's panel shows the same figures (nothing moves: every client is done,
    // and the last slot is given back).
    until_metric(p.api, "weir_proxy_in_flight", 0.0).await;
    let data = dashboard(&client(), p.api).await;
    let panel = &data["panels"]["in_flight"];
    assert_eq!(panel["mode"], "adaptive", "{panel}");
    assert_eq!(panel["limit"].as_f64(), Some(limit), "{panel}");
    assert_eq!(
        (panel["in_flight"].as_u64(), panel["queued"].as_u64()),
        (Some(0), Some(0))
    );
    let ms = |v: &serde_json::Value| v.as_f64().unwrap_or_else(|| panic!("{panel}"));
    assert!(
        (ms(&panel["min_rtt_ms"]) - min_rtt * 1000.0).abs() < 0.01,
        "{panel}"
    );
    assert!(
        (ms(&panel["sample_rtt_ms"]) - sample_rtt * 1000.0).abs() < 0.01,
        "{panel}"
    );
    let admitted: u64 = panel["admitted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["count"].as_u64().unwrap())
        .sum();
    assert_eq!(admitted, 32 * 40, "every request was let in: {panel}");
    assert_eq!(panel["shed"], serde_json::json!([]), "none was shed");
    assert!(
        data["panels"].get("upstreams").is_none(),
        "no breaker panel with the breakers off: {data}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_overload_crawlers_are_shed_before_readers() {
    let gate = Arc::new(Semaphore::new(0));
    let knee = Knee {
        knee: 1,
        base: Duration::ZERO,
    };
    let b = backend(knee, Some(Arc::clone(&gate))).await;
    let mut s = settings(format!("http://{}", b.addr).parse().unwrap(), OPEN);
    s.in_flight = Some(InFlightLimit::fixed(1, 4, Duration::from_secs(30)));
    s.server.admin_token = Some(AdminToken::new(TOKEN).unwrap());
    let p = proxy(s).await;
    let send = |headers: &'static [(&'static str, &'static str)]| {
        let addr = p.addr;
        tokio::spawn(async move {
            let answer = get(&client(), addr, "/", headers).await;
            (answer.status, answer.header("retry-after").to_string())
        })
    };
    // One reader inside the (held) backend; four crawlers fill the line.
    let mut readers = vec![send(FIREFOX)];
    until_metric(p.api, "weir_proxy_in_flight", 1.0).await;
    let mut crawlers = Vec::new();
    for n in 1..=4 {
        crawlers.push(send(GOOGLEBOT));
        until_metric(p.api, "weir_proxy_in_flight_queued", f64::from(n)).await;
    }
    // Four readers arrive at a full line: each pushes out a crawler.
    for n in 1..=4 {
        readers.push(send(FIREFOX));
        let shed = "weir_proxy_in_flight_shed_total{priority=\"0\"}";
        until_metric(p.api, shed, f64::from(n)).await;
    }
    // The dashboard's panel at the height of it: a fixed limit of 1, full, four waiting,
    // four crawlers shed, no latency measured.
    let data = dashboard(&client(), p.api).await;
    let panel = &data["panels"]["in_flight"];
    assert_eq!(panel["mode"], "fixed", "{panel}");
    assert_eq!(
        (&panel["limit"], &panel["in_flight"], &panel["queued"]),
        (&1.into(), &1.into(), &4.into()),
        "{panel}"
    );
    assert_eq!(panel["min_rtt_ms"], serde_json::Value::Null, "{panel}");
    assert_eq!(panel["sample_rtt_ms"], serde_json::Value::Null, "{panel}");
    assert_eq!(
        panel["shed"],
        serde_json::json!([{ "priority": 0, "count": 4 }]),
        "{panel}"
    );
    // A fifth crawler finds no one lower in line: shed at once.
    crawlers.push(send(GOOGLEBOT));
    for crawler in crawlers {
        let (status, retry_after) = crawler.await.unwrap();
        assert_eq!(status, 503, "crawlers are shed");
        assert_eq!(retry_after, "1");
    }
    // The backend recovers: every reader is served.
    gate.add_permits(100);
    for reader in readers {
        assert_eq!(reader.await.unwrap().0, 200, "readers keep their place");
    }
    let shed_readers = metric(p.api, "weir_proxy_in_flight_shed_total{priority=\"1\"}").await;
    assert_eq!(shed_readers, None, "no reader was shed");
    let admitted = "weir_proxy_in_flight_admitted_total{priority=\"1\"}";
    assert_eq!(metric(p.api, admitted).await, Some(5.0));
    until_metric(p.api, "weir_proxy_in_flight", 0.0).await;
    let data = dashboard(&client(), p.api).await;
    let panel = &data["panels"]["in_flight"];
    assert_eq!(
        (&panel["shed"], &panel["in_flight"], &panel["queued"]),
        (
            &serde_json::json!([{ "priority": 0, "count": 5 }]),
            &0.into(),
            &0.into()
        ),
        "{panel}"
    );
    let readers = panel["admitted"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["priority"] == 1);
    assert_eq!(readers.map(|a| &a["count"]), Some(&5.into()), "{panel}");
}
