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

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{bounded, check_body, settings, simple_rules, Scratch, TestServer};
use weir_server::AdminToken;

const TOKEN: &str = "browser-admin-token-0123456789";

/// An executable called `name` on the `PATH`, if any.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn chromium() -> Option<PathBuf> {
    if let Some(chosen) = std::env::var_os("WEIR_CHROMIUM") {
        return Some(PathBuf::from(chosen));
    }
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .into_iter()
    .find_map(on_path)
}

/// The workspace's target directory (where the screenshot is kept, never committed).
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_headless_chromium() {
    let Some(chromium) = chromium() else {
        eprintln!(
            "SKIPPED: chromium not installed (apt-get install chromium, or set WEIR_CHROMIUM)"
        );
        return;
    };
    let Some(python) = on_path("python3") else {
        eprintln!("SKIPPED: python3 not installed (it drives chromium)");
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
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/dashboard.py");
        let mut command = match on_path("timeout") {
            // A hard stop past the script's own budget (45 s), inside `bounded`'s 60 s.
            Some(timeout) => {
                let mut command = Command::new(timeout);
                command.args(["-k", "5", "50"]).arg(python);
                command
            }
            None => Command::new(python),
        };
        command
            .arg(script)
            .arg("--chromium")
            .arg(&chromium)
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
        let output = tokio::task::spawn_blocking(move || command.output())
            .await
            .unwrap()
            .expect("python3 runs");
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("{stdout}");
        assert!(output.status.success(), "{stdout}\n{stderr}");
        assert!(
            screenshot.is_file(),
            "no screenshot at {}",
            screenshot.display()
        );
        server.stop().await.unwrap();
    })
    .await;
}
