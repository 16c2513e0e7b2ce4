//! `weir proxy`'s path descriptor end to end, on real sockets (a recording backend behind
//! the proxy): no spelling of a limited path buys a fresh budget. Under `--path-match
//! normalized` (the default) each spelling a common router sends to `/login` shares its
//! budget, and each spelling routers disagree on is refused with `400` before any limit or
//! upstream; under `exact` the spellings stay apart, as before. Rules naming a path in a
//! form no request's descriptor takes are refused. Issue 26.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::time::Duration;

use common::{backend, client, get, proxy, settings, upstream};
use weir_proxy::PathMatch;

/// `/login` once an hour per path (reader class), every request 10 an hour.
const LOGIN_ONCE: &str = "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: fixed_window, limit: 10, window: 1h}
  - key: class
    value: reader
    descriptors:
      - key: path
        value: /login
        rule: {algorithm: fixed_window, limit: 1, window: 1h}
";

/// Spellings Spring/Tomcat, Express, ASP.NET or IIS route to the `/login` handler by
/// default: they share `/login`'s budget.
const SHARING: [&str; 9] = [
    "/login/",
    "/LOGIN",
    "/Login/",
    "/login;a=1",
    "/login;jsessionid=0123/",
    "//login",
    "/x/../login",
    "/log%69n",
    "/%4C%4F%47%49%4E",
];

/// Spellings routers read differently from one another, each with a word of its refusal.
const REFUSED: [(&str, &str); 10] = [
    ("/login/..;/login", "'..;'"),
    ("/login%2f", "encoded slash"),
    ("/login%2F..", "encoded slash"),
    ("/login%5c", "encoded slash"),
    ("/login%00", "control byte"),
    ("/login%0d%0a", "control byte"),
    ("/login%252f", "encoded percent"),
    ("/login%3Ba=1", "encoded semicolon"),
    ("/login%C0%AF", "not UTF-8"),
    ("/login\\", "backslash"),
];

/// Issue 26: after `/login` was limited, `/login/`, `/LOGIN`, `/login;a=1`,
/// `/login/..;/login`, `/login%2f` and `/login%00` each got a fresh budget and were
/// forwarded verbatim. Now each either spends `/login`'s budget or is refused with 400.
#[tokio::test]
async fn no_spelling_of_a_limited_path_buys_a_fresh_budget() {
    let b = backend("app", Duration::ZERO).await;
    let p = proxy(settings(upstream(&b), LOGIN_ONCE)).await;
    let c = client();
    // A spelling spends the budget of the path it names: `/Login/` first, then `/login`.
    let first = get(&c, p.addr, "/Login/?next=%2Fhome", &[]).await;
    assert_eq!((first.status, first.body.as_str()), (200, "app"));
    assert_eq!(get(&c, p.addr, "/login", &[]).await.status, 429);
    for spelling in SHARING {
        let a = get(&c, p.addr, spelling, &[]).await;
        assert_eq!(a.status, 429, "{spelling} shares /login's spent budget");
    }
    for (spelling, why) in REFUSED {
        let a = get(&c, p.addr, spelling, &[]).await;
        assert_eq!(a.status, 400, "{spelling} is refused: {}", a.body);
        assert!(
            a.body.contains("ambiguous request path") && a.body.contains(why),
            "{spelling}: {}",
            a.body
        );
    }
    // Only the first reached the backend, spelt as the client spelt it.
    assert_eq!(*b.record.targets.lock().unwrap(), ["/Login/?next=%2Fhome"]);
    // Other paths are untouched, and the refusals are the client's errors.
    assert_eq!(get(&c, p.addr, "/about", &[]).await.status, 200);
    let metrics = get(&c, p.api, "/metrics", &[]).await;
    for counted in [
        r#"weir_requests_total{api="proxy",result="ok"} 2"#,
        r#"weir_requests_total{api="proxy",result="over_limit"} 10"#,
        r#"weir_requests_total{api="proxy",result="client_error"} 10"#,
    ] {
        assert!(
            metrics.body.contains(counted),
            "{counted}: {}",
            metrics.body
        );
    }
}

/// `--path-match exact` keeps the reading from before issue 26 for backends that tell
/// these spellings apart: each is a path (and a budget) of its own. Control bytes are
/// refused whatever the mode.
#[tokio::test]
async fn exact_path_matching_keeps_each_spelling_apart() {
    let b = backend("app", Duration::ZERO).await;
    let mut s = settings(upstream(&b), LOGIN_ONCE);
    s.path_match = PathMatch::Exact;
    let p = proxy(s).await;
    let c = client();
    assert_eq!(get(&c, p.addr, "/login", &[]).await.status, 200);
    assert_eq!(get(&c, p.addr, "/./login", &[]).await.status, 429);
    for spelling in [
        "/LOGIN",
        "/login/",
        "/login;a=1",
        "/login%2f",
        "/login/..;/login",
    ] {
        let a = get(&c, p.addr, spelling, &[]).await;
        assert_eq!(a.status, 200, "{spelling} is a path of its own: {}", a.body);
    }
    let a = get(&c, p.addr, "/login%00", &[]).await;
    assert_eq!(a.status, 400, "{}", a.body);
    assert!(a.body.contains("control byte"), "{}", a.body);
    assert_eq!(b.record.count(), 6);
}

/// Under `normalized`, a rule on `/Login/` would match no request (every descriptor is
/// lower case, without a trailing slash): the proxy refuses to start on it, saying what to
/// write, rather than run with the path unlimited. Under `exact` the same rule is fine.
#[tokio::test]
async fn a_rule_on_a_path_spelling_no_request_has_is_refused() {
    let b = backend("app", Duration::ZERO).await;
    let rules = "
domain: proxy
descriptors:
  - key: class
    value: reader
    descriptors:
      - key: path
        value: /Login/
        rule: {algorithm: fixed_window, limit: 1, window: 1h}
";
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let error = weir_proxy::run(settings(upstream(&b), rules), listener, api, async {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("path value '/Login/' never matches")
            && error.contains("--path-match normalized")
            && error.contains("'/login'"),
        "{error}"
    );
    let mut s = settings(upstream(&b), rules);
    s.path_match = PathMatch::Exact;
    let p = proxy(s).await;
    let c = client();
    assert_eq!(get(&c, p.addr, "/Login/", &[]).await.status, 200);
    assert_eq!(get(&c, p.addr, "/Login/", &[]).await.status, 429);
}

/// Issue 10's first finding: a path over the matcher's 1024-byte value limit, or padded
/// with `./` segments, was checked against no limit at all and not counted.
#[tokio::test]
async fn long_and_dot_padded_paths_are_limited_like_any_other() {
    let b = backend("app", Duration::ZERO).await;
    let p = proxy(settings(
        upstream(&b),
        "
domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: fixed_window, limit: 3, window: 1h}
  - key: class
    value: reader
    descriptors:
      - key: path
        rule: {algorithm: fixed_window, limit: 1, window: 1h}
",
    ))
    .await;
    let c = client();
    // The per-path limit: `/x` once; its dot-padded and slash-doubled spellings are `/x`.
    assert_eq!(get(&c, p.addr, "/x", &[]).await.status, 200);
    let padded = format!("/x{}", "/.".repeat(700));
    assert_eq!(get(&c, p.addr, &padded, &[]).await.status, 429);
    assert_eq!(
        get(&c, p.addr, "//X/%2e/", &[]).await.status,
        429,
        "`/X/` is `/x` too (issue 26; it was a path of its own)"
    );
    // A 5000-byte path: limited on its bounded form (head + digest), counted globally.
    let long = format!("/{}", "a".repeat(5000));
    assert_eq!(get(&c, p.addr, &long, &[]).await.status, 200);
    let other_long = format!("/{}", "b".repeat(5000));
    assert_eq!(get(&c, p.addr, &other_long, &[]).await.status, 200);
    // The global limit (3) was charged by the three allowed requests above.
    let third_long = format!("/{}", "c".repeat(5000));
    assert_eq!(get(&c, p.addr, &third_long, &[]).await.status, 429);
    assert_eq!(b.record.count(), 3);
}
