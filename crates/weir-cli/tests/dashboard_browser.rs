//! `weir proxy`'s panels on the dashboard in a real browser: the built binary with
//! `--max-in-flight auto --breaker` in front of a loopback backend (200, and 500 under
//! `/fail`), its dashboard on `--api` loaded in headless Chromium, driven over its DevTools
//! pipe by `weir-server/tests/browser/proxy_dashboard.py`. Both panels are drawn before any
//! traffic; after real requests the in-flight limit, the latencies, the admissions and the
//! breaker's window on the page are `/dashboard/data`'s; a failing backend's breaker is
//! drawn open; and the page reports no error (console, uncaught exception, failed load).
//! The screenshot is kept in `target/dashboard-browser/proxy.png`.
//!
//! Without Chromium (or `python3`) the test says `SKIPPED: chromium not installed` and
//! passes; `scripts/test` installs Chromium first. `WEIR_CHROMIUM` names another binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{backend, spawn_logged_fields, terminate};
use weir_testkit::browser::{expect_success, target_dir, Browser};

const TOKEN: &str = "browser-admin-token-0123456789";

/// Rules that let every request through (the built-in ones limit each reader to a burst of
/// 40, fewer than the test sends), so that every call reaches the backend and its breaker.
const RULES: &str = "domain: proxy
descriptors:
  - key: global
    value: all
    rule: {algorithm: gcra, rate: 100000, per: 1s, burst: 100000}
";

#[test]
fn the_proxys_panels_in_headless_chromium() {
    let Some(browser) = Browser::find() else {
        return;
    };
    let dir = std::env::temp_dir().join(format!("weir-cli-proxy-dashboard-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let rules = dir.join("proxy.yaml");
    std::fs::write(&rules, RULES).unwrap();
    let upstream = format!("http://{}", backend());
    let (proxy, addrs) = spawn_logged_fields(
        &[
            "proxy",
            "--upstream",
            &upstream,
            "--listen",
            "127.0.0.1:0",
            "--api",
            "127.0.0.1:0",
            "--config",
            rules.to_str().unwrap(),
            "--max-in-flight",
            "auto",
            "--breaker",
            // Every call stays in the window for the whole test, whatever the machine's load.
            "--breaker-window",
            "1h",
            "--breaker-min-calls",
            "5",
        ],
        &["listen", "api"],
        &[("WEIR_ADMIN_TOKEN", TOKEN)],
    );
    let api = &addrs[1];

    let screenshot = target_dir().join("dashboard-browser/proxy.png");
    let _ = std::fs::remove_file(&screenshot);
    let mut command = browser.script("proxy_dashboard.py");
    command
        .arg("--url")
        .arg(format!("http://{api}"))
        .arg("--proxy")
        .arg(format!("http://{}", proxy.http))
        .args(["--token", TOKEN])
        .args(["--upstream", &upstream])
        .args(["--fail-path", "/fail"])
        .arg("--screenshot")
        .arg(&screenshot);
    expect_success(command, &screenshot);
    assert!(terminate(proxy).success());
    std::fs::remove_dir_all(&dir).unwrap();
}
