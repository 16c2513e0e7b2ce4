//! `weir proxy` end to end, on real sockets: a recording backend behind the proxy, clients
//! sending ten times more than the rules allow. Load tests run on the system clock for
//! two seconds or less each.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{backend, client, get, proxy, send, settings, upstream};
use weir_tower::{ClientIp, InFlightLimit, OnLimit};

const GLOBAL_10: &str = "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: sliding_log, limit: 10, window: 1s}
";

/// `total` requests spread evenly over `over`, from `clients` concurrent clients; the
/// statuses in order of completion.
async fn load(
    addr: std::net::SocketAddr,
    total: usize,
    over: Duration,
    clients: usize,
    headers: &'static [(&'static str, &'static str)],
) -> Vec<u16> {
    let per_client = total / clients;
    let gap = over / u32::try_from(per_client).unwrap();
    let mut tasks = Vec::new();
    for _ in 0..clients {
        tasks.push(tokio::spawn(async move {
            let c = client();
            let mut codes = Vec::new();
            let mut tick = tokio::time::interval(gap);
            for _ in 0..per_client {
                tick.tick().await;
                codes.push(get(&c, addr, "/", headers).await.status);
            }
            codes
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_never_sees_more_than_the_rate_under_ten_times_the_load() {
    let b = backend("app", Duration::ZERO).await;
    let p = proxy(settings(upstream(&b), GLOBAL_10)).await;
    // 200 requests in 2 s: 10x the 10/s limit.
    let codes = load(p.addr, 200, Duration::from_secs(2), 8, &[]).await;
    let ok = codes.iter().filter(|&&c| c == 200).count();
    let limited = codes.iter().filter(|&&c| c == 429).count();
    assert_eq!(ok + limited, 200, "only 200s and 429s: {codes:?}");
    assert_eq!(
        ok,
        b.record.count(),
        "every 200 reached the backend, no 429 did"
    );
    assert!(
        (10..=30).contains(&ok),
        "about 10 per second got through: {ok}"
    );
    // Exact at the proxy; at the backend allow 50 ms of loopback jitter.
    let worst = b.record.max_in_any(Duration::from_millis(950));
    assert!(
        worst <= 10,
        "{worst} requests reached the backend within 950 ms"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_never_sees_more_than_n_in_flight() {
    let slow = backend("slow", Duration::from_millis(100)).await;
    let mut s = settings(upstream(&slow), GLOBAL_10);
    s.server.engine.rules = weir_engine::RuleSource::Inline {
        name: "open.yaml",
        yaml: "domain: proxy\n",
    };
    s.in_flight = Some(InFlightLimit::fixed(3, 100, Duration::from_secs(5)));
    let p = proxy(s).await;
    let codes = load(p.addr, 30, Duration::from_millis(10), 30, &[]).await;
    assert!(
        codes.iter().all(|&c| c == 200),
        "all wait their turn: {codes:?}"
    );
    assert_eq!(
        slow.record.peak(),
        3,
        "at most 3 in flight, and the slots are used"
    );

    // A short queue: the excess is turned away with 503 at once.
    let mut s = settings(upstream(&slow), "domain: proxy\n");
    s.in_flight = Some(InFlightLimit::fixed(2, 2, Duration::from_secs(5)));
    let p = proxy(s).await;
    let codes = load(p.addr, 20, Duration::from_millis(10), 20, &[]).await;
    let busy = codes.iter().filter(|&&c| c == 503).count();
    assert!(busy >= 10, "most of 20 at once are refused: {codes:?}");
    assert!(slow.record.peak() <= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_requests_arrive_paced() {
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(
        upstream(&b),
        "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: gcra, rate: 10, per: 1s, burst: 1}
",
    );
    s.on_limit = OnLimit::Queue {
        max_wait: Duration::from_secs(3),
        max_queued: 64,
    };
    let p = proxy(s).await;
    // 12 at once: one goes, the rest wait their 100 ms turns.
    let codes = load(p.addr, 12, Duration::from_millis(1), 12, &[]).await;
    assert!(codes.iter().all(|&c| c == 200), "{codes:?}");
    let t = b.record.sorted_arrivals();
    let span_ms = (t[t.len() - 1] - t[0]) / 1_000_000;
    assert!(
        span_ms >= 1_000,
        "12 requests at 10/s take >= 1.1 s: {span_ms} ms"
    );
    assert!(
        b.record.max_in_any(Duration::from_millis(450)) <= 5,
        "paced, not bunched"
    );
}

const CRAWLERS: &str = "
domain: proxy
descriptors:
  - key: class
    value: crawler
    rule: {algorithm: fixed_window, limit: 3, window: 1h}
  - key: class
    value: reader
    descriptors:
      - key: remote_address
        rule: {algorithm: fixed_window, limit: 100, window: 1h}
";

#[tokio::test]
async fn crawlers_get_their_own_limit_and_upstream_and_readers_are_untouched() {
    let readers = backend("main", Duration::ZERO).await;
    let crawlers = backend("crawler-replica", Duration::ZERO).await;
    let mut s = settings(upstream(&readers), CRAWLERS);
    s.class_upstreams
        .insert("crawler".into(), upstream(&crawlers));
    let p = proxy(s).await;
    let c = client();
    let bot = [(
        "user-agent",
        "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)",
    )];
    let mut bot_codes = Vec::new();
    for _ in 0..6 {
        let a = get(&c, p.addr, "/article", &bot).await;
        if a.status == 200 {
            assert_eq!(a.body, "crawler-replica");
        }
        bot_codes.push(a.status);
    }
    assert_eq!(bot_codes, [200, 200, 200, 429, 429, 429]);
    for _ in 0..20 {
        let a = get(
            &c,
            p.addr,
            "/article",
            &[("user-agent", "Mozilla/5.0 Firefox/128.0")],
        )
        .await;
        assert_eq!((a.status, a.body.as_str()), (200, "main"));
    }
    assert_eq!(crawlers.record.count(), 3);
    assert_eq!(readers.record.count(), 20);
}

#[tokio::test]
async fn denied_requests_degrade_to_the_fallback_upstream() {
    let main = backend("main", Duration::ZERO).await;
    let cheap = backend("cached", Duration::ZERO).await;
    let mut s = settings(
        upstream(&main),
        "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: fixed_window, limit: 2, window: 1h}
",
    );
    s.fallback_upstream = Some(upstream(&cheap));
    s.on_limit = OnLimit::Degrade;
    let p = proxy(s).await;
    let c = client();
    let mut bodies = Vec::new();
    for _ in 0..5 {
        let a = get(&c, p.addr, "/", &[]).await;
        assert_eq!(a.status, 200);
        bodies.push(a.body);
    }
    assert_eq!(bodies, ["main", "main", "cached", "cached", "cached"]);
}

#[tokio::test]
async fn a_429_carries_retry_after_and_the_rate_limit_headers() {
    let b = backend("app", Duration::ZERO).await;
    let p = proxy(settings(upstream(&b), CRAWLERS)).await;
    let c = client();
    let ua = [("user-agent", "bingbot/2.0")];
    let first = get(&c, p.addr, "/", &ua).await;
    assert_eq!(
        first.header("ratelimit-policy"),
        r#""proxy.class_crawler";q=3;w=3600"#
    );
    assert_eq!(
        first.header("ratelimit").split(";t=").next(),
        Some(r#""proxy.class_crawler";r=2"#)
    );
    get(&c, p.addr, "/", &ua).await;
    get(&c, p.addr, "/", &ua).await;
    let denied = get(&c, p.addr, "/", &ua).await;
    assert_eq!(denied.status, 429);
    let retry: u64 = denied.header("retry-after").parse().unwrap();
    assert!((1..=3600).contains(&retry));
    assert_eq!(
        denied.header("ratelimit"),
        format!(r#""proxy.class_crawler";r=0;t={retry}"#)
    );
    assert!(
        denied.body.contains("rate limit exceeded"),
        "{}",
        denied.body
    );
}

#[tokio::test]
async fn a_spoofed_forwarded_for_from_an_untrusted_peer_does_not_change_the_key() {
    let b = backend("app", Duration::ZERO).await;
    let rules = "
domain: proxy
descriptors:
  - key: class
    value: reader
    descriptors:
      - key: remote_address
        rule: {algorithm: fixed_window, limit: 2, window: 1h}
";
    let mut s = settings(upstream(&b), rules);
    s.client_ip = ClientIp::new().trust("10.0.0.0/8".parse().unwrap());
    let p = proxy(s).await;
    let c = client();
    let mut codes = Vec::new();
    for spoof in ["1.1.1.1", "2.2.2.2", "3.3.3.3"] {
        codes.push(
            get(&c, p.addr, "/", &[("x-forwarded-for", spoof)])
                .await
                .status,
        );
    }
    assert_eq!(codes, [200, 200, 429]);

    let mut s = settings(upstream(&b), rules);
    s.client_ip = ClientIp::new().trust("127.0.0.0/8".parse().unwrap());
    let p = proxy(s).await;
    for client_ip in ["1.1.1.1", "2.2.2.2", "3.3.3.3"] {
        for _ in 0..2 {
            let a = get(&c, p.addr, "/", &[("x-forwarded-for", client_ip)]).await;
            assert_eq!(
                a.status, 200,
                "{client_ip} behind a trusted proxy has its own budget"
            );
        }
    }
}

#[tokio::test]
async fn it_is_a_real_proxy_bodies_headers_and_forwarding() {
    let b = backend("echo", Duration::ZERO).await;
    let p = proxy(settings(upstream(&b), "domain: proxy\n")).await;
    let c = client();
    let a = send(
        &c,
        p.addr,
        "POST",
        "/submit?x=1",
        &[
            ("x-custom", "kept"),
            ("connection", "x-drop-me"),
            ("x-drop-me", "1"),
            ("x-forwarded-for", "203.0.113.5"),
        ],
        "hello body",
    )
    .await;
    assert_eq!((a.status, a.body.as_str()), (200, "echo:hello body"));
    assert_eq!(
        a.header("x-backend"),
        "echo",
        "response headers pass through"
    );
    assert_eq!(
        a.header("keep-alive"),
        "",
        "hop-by-hop response headers are stripped"
    );
    let seen = b.record.last_headers.lock().unwrap().clone().unwrap();
    assert_eq!(seen["x-custom"], "kept");
    assert!(
        seen.get("x-drop-me").is_none(),
        "headers named by Connection are hop-by-hop"
    );
    assert_eq!(seen["x-forwarded-for"], "203.0.113.5, 127.0.0.1");
    assert_eq!(seen["forwarded"], "for=127.0.0.1;proto=http");
}

#[tokio::test]
async fn upstream_failures_are_502_and_504_with_a_clear_body() {
    // Nothing listens on a port we bound and closed.
    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let p = proxy(settings(
        format!("http://{dead}").parse().unwrap(),
        "domain: proxy\n",
    ))
    .await;
    let a = get(&client(), p.addr, "/", &[]).await;
    assert_eq!(a.status, 502);
    assert!(
        a.body
            .contains(&format!("upstream http://{dead} is unreachable")),
        "{}",
        a.body
    );

    let slow = backend("slow", Duration::from_secs(3)).await;
    let mut s = settings(upstream(&slow), "domain: proxy\n");
    s.upstream_timeout = Duration::from_millis(200);
    let p = proxy(s).await;
    let a = get(&client(), p.addr, "/", &[]).await;
    assert_eq!(a.status, 504);
    assert!(
        a.body.contains("did not answer within 200 ms"),
        "{}",
        a.body
    );
}

/// The dashboard is `weir serve`'s own, on the proxy's API listener: the page without a
/// token (it holds no data), its data only with one, and the data shows the proxy's rules
/// and the clients its limits denied.
#[tokio::test]
async fn the_dashboard_shows_the_proxys_rules_and_denials_behind_the_admin_token() {
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), CRAWLERS);
    s.server.admin_token = Some(weir_listen::AdminToken::new("dash-token-for-tests").unwrap());
    let p = proxy(s).await;
    let c = client();
    let mut denied = 0;
    for _ in 0..5 {
        let a = get(&c, p.addr, "/", &[("user-agent", "bingbot")]).await;
        denied += usize::from(a.status == 429);
    }
    assert!(denied > 0, "the crawler class's limit denied some");

    let page = get(&c, p.api, "/dashboard", &[]).await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("<html"), "{}", page.body);
    assert_eq!(get(&c, p.api, "/dashboard/data", &[]).await.status, 401);
    let data = get(
        &c,
        p.api,
        "/dashboard/data",
        &[("authorization", "Bearer dash-token-for-tests")],
    )
    .await;
    assert_eq!(data.status, 200, "{}", data.body);
    let data: serde_json::Value = serde_json::from_str(&data.body).unwrap();
    let rules = data["rules"].to_string();
    assert!(rules.contains("proxy.class_crawler"), "{rules}");
    let total = data["top_denied"]["total_denials"].as_u64().unwrap();
    assert_eq!(usize::try_from(total).unwrap(), denied, "{data}");
}

#[tokio::test]
async fn metrics_and_the_admin_api_are_served_beside_the_proxy() {
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), CRAWLERS);
    s.server.admin_token = Some(weir_listen::AdminToken::new("s3cret-token-for-tests").unwrap());
    let p = proxy(s).await;
    let c = client();
    get(&c, p.addr, "/", &[("user-agent", "bingbot")]).await;
    let metrics = get(&c, p.api, "/metrics", &[]).await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.contains(
            r#"weir_decisions_total{domain="proxy",rule="proxy.class_crawler",outcome="allowed"} 1"#
        ),
        "{}",
        metrics.body
    );
    assert!(
        metrics
            .body
            .contains(r#"weir_requests_total{api="proxy",result="ok"} 1"#),
        "{}",
        metrics.body
    );
    assert_eq!(get(&c, p.api, "/admin/rules", &[]).await.status, 401);
    let rules = get(
        &c,
        p.api,
        "/admin/rules",
        &[("authorization", "Bearer s3cret-token-for-tests")],
    )
    .await;
    assert_eq!(rules.status, 200);
    assert!(rules.body.contains("proxy.class_crawler"), "{}", rules.body);
    // Issue 10: no unauthenticated /v1/check on the proxy's own counters unless asked.
    let body = r#"{"domain": "proxy", "descriptors": [{"entries": [{"key": "global", "value": "all"}]}], "hits_addend": 1000}"#;
    let check = send(
        &c,
        p.api,
        "POST",
        "/v1/check",
        &[("content-type", "application/json")],
        body,
    )
    .await;
    assert_eq!(check.status, 404, "{}", check.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_in_flight_requests_finish() {
    let slow = backend("slow", Duration::from_millis(300)).await;
    let p = proxy(settings(upstream(&slow), "domain: proxy\n")).await;
    let addr = p.addr;
    let pending = tokio::spawn(async move { get(&client(), addr, "/", &[]).await });
    while slow.record.count() == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    p.stop.send(()).unwrap();
    let a = pending.await.unwrap();
    assert_eq!((a.status, a.body.as_str()), (200, "slow"));
    tokio::time::timeout(Duration::from_secs(5), p.task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn a_client_that_never_finishes_its_headers_is_dropped() {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), "domain: proxy\n");
    s.server.header_read_timeout = Duration::from_millis(300);
    let p = proxy(s).await;
    let mut stream = tokio::net::TcpStream::connect(p.addr).await.unwrap();
    stream
        .write_all(b"GET / HTTP/1.1\r\nhost: slow\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the proxy closed the connection within 5 s");
    assert_eq!(b.record.count(), 0, "nothing reached the backend");
}

#[tokio::test]
async fn rules_the_proxy_cannot_run_are_refused_at_start_and_on_reload() {
    let dir = std::env::temp_dir().join(format!("weir-proxy-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("rules.yaml");
    std::fs::write(&file, CRAWLERS).unwrap();
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), CRAWLERS);
    s.server.engine.rules = weir_engine::RuleSource::Path(file.clone());
    s.server.engine.reload.watch = false;
    s.server.admin_token = Some(weir_listen::AdminToken::new("reload-token-for-tests").unwrap());
    let p = proxy(s).await;
    let c = client();
    let bot = [("user-agent", "bingbot")];
    let codes: Vec<u16> = {
        let mut v = Vec::new();
        for _ in 0..4 {
            v.push(get(&c, p.addr, "/", &bot).await.status);
        }
        v
    };
    assert_eq!(codes, [200, 200, 200, 429]);

    // Valid YAML and valid rules, but no `proxy` domain: refused, the old rules stay.
    std::fs::write(&file, "domain: other\n").unwrap();
    let auth = [("authorization", "Bearer reload-token-for-tests")];
    let answer = send(&c, p.api, "POST", "/admin/reload", &auth, "").await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert!(
        answer
            .body
            .contains("the rule files define no domain 'proxy'"),
        "{}",
        answer.body
    );
    assert_eq!(
        get(&c, p.addr, "/", &bot).await.status,
        429,
        "still limited"
    );

    // A concurrency rule in the proxy's domain: refused too.
    std::fs::write(
        &file,
        "domain: proxy\ndescriptors:\n  - key: global\n    value: all\n    rule: {algorithm: concurrency, max_leases: 3}\n",
    )
    .unwrap();
    let answer = send(&c, p.api, "POST", "/admin/reload", &auth, "").await;
    assert_eq!(answer.status, 422, "{}", answer.body);
    assert!(
        answer.body.contains("use --max-in-flight"),
        "{}",
        answer.body
    );

    // At start-up the same rules stop the proxy with the reason.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut bad = settings(upstream(&b), CRAWLERS);
    bad.server.engine.rules = weir_engine::RuleSource::Path(file.clone());
    let error = weir_proxy::run(bad, listener, api, std::future::pending())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("concurrency rules are not for the proxy"),
        "{error}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn shadow_rules_are_reported_not_enforced_and_the_others_still_count() {
    let b = backend("app", Duration::ZERO).await;
    let rules = "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: fixed_window, limit: 1, window: 1h, shadow: true}
  - key: class
    value: reader
    descriptors:
      - key: remote_address
        rule: {algorithm: fixed_window, limit: 3, window: 1h}
";
    let p = proxy(settings(upstream(&b), rules)).await;
    let c = client();
    let mut codes = Vec::new();
    for _ in 0..4 {
        codes.push(get(&c, p.addr, "/", &[]).await.status);
    }
    // The shadow rule (1 an hour) denies from the second request on (three times), but only
    // reports it; the per-IP rule (3 an hour) is charged as if the shadow rule were not there.
    assert_eq!(codes, [200, 200, 200, 429]);
    let metrics = get(&c, p.api, "/metrics", &[]).await.body;
    assert!(
        metrics.contains(
            r#"weir_decisions_total{domain="proxy",rule="proxy.global_all",outcome="shadow_denied"} 3"#
        ),
        "{metrics}"
    );
    assert_eq!(b.record.count(), 3);
}

/// Issue 10: behind a trusted balancer that appends `X-Forwarded-For`, a client's own
/// `Forwarded` header used to be believed instead, so each request could pick its key.
#[tokio::test]
async fn a_clients_forwarded_header_is_not_believed_over_the_balancers_x_forwarded_for() {
    let b = backend("app", Duration::ZERO).await;
    let rules = "
domain: proxy
descriptors:
  - key: class
    value: reader
    descriptors:
      - key: remote_address
        rule: {algorithm: fixed_window, limit: 2, window: 1h}
";
    let mut s = settings(upstream(&b), rules);
    s.client_ip = ClientIp::new().trust("127.0.0.0/8".parse().unwrap());
    let p = proxy(s).await;
    let c = client();
    let mut codes = Vec::new();
    for spoof in ["1.1.1.1", "2.2.2.2", "3.3.3.3"] {
        let forwarded = format!("for={spoof}");
        let headers: Vec<(&str, &str)> = vec![
            ("forwarded", forwarded.as_str()),
            ("x-forwarded-for", "9.9.9.9"),
        ];
        codes.push(get(&c, p.addr, "/", &headers).await.status);
    }
    assert_eq!(codes, [200, 200, 429], "one client (9.9.9.9), one budget");
}

/// The admin API beside the proxy reaches the records the proxy decides on: a crawler
/// class blocked through `/admin/keys/block` is refused by the proxy at once, and its
/// usage is what `/admin/keys/inspect` reports (both address (rule, key) records).
#[tokio::test]
async fn an_admin_block_reaches_the_proxys_own_decisions() {
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), CRAWLERS);
    s.server.admin_token = Some(weir_listen::AdminToken::new("block-token-for-tests").unwrap());
    let p = proxy(s).await;
    let c = client();
    let auth = [
        ("authorization", "Bearer block-token-for-tests"),
        ("content-type", "application/json"),
    ];
    let crawler = [("user-agent", "bingbot")];
    assert_eq!(get(&c, p.addr, "/", &crawler).await.status, 200);
    let key = r#"{"domain": "proxy", "entries": [{"key": "class", "value": "crawler"}]}"#;
    let inspect = send(&c, p.api, "POST", "/admin/keys/inspect", &auth, key).await;
    assert_eq!(inspect.status, 200, "{}", inspect.body);
    assert!(inspect.body.contains(r#""used":1"#), "{}", inspect.body);
    let block = r#"{"domain": "proxy", "entries": [{"key": "class", "value": "crawler"}], "duration_ms": 60000}"#;
    let blocked = send(&c, p.api, "POST", "/admin/keys/block", &auth, block).await;
    assert_eq!(blocked.status, 200, "{}", blocked.body);
    assert_eq!(get(&c, p.addr, "/", &crawler).await.status, 429);
    assert_eq!(
        b.record.count(),
        1,
        "the blocked request never reached the backend"
    );
}
