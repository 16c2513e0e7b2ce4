//! The dashboard in a real browser: headless Chromium (Debian's `chromium`), driven over
//! its DevTools pipe by `tests/browser/dashboard.py` (Python's standard library only),
//! against a server on loopback under a `ManualClock`. The page locks without the token
//! and its data is refused, a wrong token is refused and forgotten, the token opens it
//! (the rule, its file, the store's mode), and a denial is on the page within two seconds
//! of happening. The screenshot is kept in `target/dashboard-browser/dashboard.png`.
//!
//! Without Chromium (or `python3`) the test says `SKIPPED: chromium not installed` and
//! passes; `scripts/test` installs Chromium first. `WEIR_CHROMIUM` names another binary.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};
use weir_server::AdminToken;
use weir_testkit::browser::{expect_success, target_dir, Browser};

const TOKEN: &str = "browser-admin-token-0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_headless_chromium() {
    let Some(browser) = Browser::find() else {
        return;
    };
    bounded(async {
        let dir = Scratch::new("dashboard-browser");
        let rules = dir.write("rules.yaml", &simple_rules("d", "user", 1, "hour"));
        let (mut settings, _clock) = settings(Some(&rules));
        settings.admin_token = Some(AdminToken::new(TOKEN).unwrap());
        let server = TestServer::start(settings).await;

        let screenshot = target_dir().join("dashboard-browser/dashboard.png");
        let _ = std::fs::remove_file(&screenshot);
        let mut command = browser.script("dashboard.py");
        command
            .arg("--url")
            .arg(format!("http://{}", server.http))
            .args(["--token", TOKEN])
            .arg("--check-body")
            .arg(check_body("d", &[("user", "alice")]))
            .args(["--rule", "d.user", "--key", "alice"])
            .arg("--rules-file")
            .arg(&rules)
            .arg("--screenshot")
            .arg(&screenshot);
        tokio::task::spawn_blocking(move || expect_success(command, &screenshot))
            .await
            .unwrap();
        server.stop().await.unwrap();
    })
    .await;
}
