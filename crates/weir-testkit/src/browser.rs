//! Headless Chromium for the dashboard's browser tests (`weir-server`'s
//! `tests/dashboard_browser.rs` for `weir serve`, `weir-cli`'s for `weir proxy`): finding
//! the browser and `python3`, which drives it over its DevTools pipe
//! (`weir-server/tests/browser/*.py`, Python's standard library only), and running one
//! such script with a hard stop. Without either the tests print `SKIPPED` and pass;
//! `scripts/test` installs Chromium first.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The browser scripts' folder: `crates/weir-server/tests/browser`.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../weir-server/tests/browser")
}

/// The workspace's target directory (where screenshots are kept, never committed).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    )
}

/// An executable called `name` on the `PATH`, if any.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Chromium (`WEIR_CHROMIUM`, else Debian's `chromium` or Google's names) and `python3`.
#[derive(Debug, Clone)]
pub struct Browser {
    /// The Chromium binary.
    pub chromium: PathBuf,
    python: PathBuf,
}

impl Browser {
    /// Both programs, or `None` after printing why the test is skipped.
    pub fn find() -> Option<Browser> {
        let chromium = std::env::var_os("WEIR_CHROMIUM")
            .map(PathBuf::from)
            .or_else(|| {
                [
                    "chromium",
                    "chromium-browser",
                    "google-chrome",
                    "google-chrome-stable",
                ]
                .into_iter()
                .find_map(on_path)
            });
        let Some(chromium) = chromium else {
            eprintln!(
                "SKIPPED: chromium not installed (apt-get install chromium, or set WEIR_CHROMIUM)"
            );
            return None;
        };
        let Some(python) = on_path("python3") else {
            eprintln!("SKIPPED: python3 not installed (it drives chromium)");
            return None;
        };
        Some(Browser { chromium, python })
    }

    /// `python3 SCRIPT --chromium CHROMIUM` (the script in [`scripts_dir`]), under
    /// `timeout -k 5 50` where `timeout` exists: a hard stop past a script's own 45 s budget,
    /// inside a test's 60 s bound. Add the script's own arguments.
    pub fn script(&self, script: &str) -> Command {
        let mut command = match on_path("timeout") {
            Some(timeout) => {
                let mut command = Command::new(timeout);
                command.args(["-k", "5", "50"]).arg(&self.python);
                command
            }
            None => Command::new(&self.python),
        };
        command
            .arg(scripts_dir().join(script))
            .arg("--chromium")
            .arg(&self.chromium);
        command
    }
}

/// Runs a browser script to its end, prints what it printed, and fails the test (with its
/// output) unless every check passed and `screenshot` was written.
pub fn expect_success(mut command: Command, screenshot: &Path) {
    let output = command.output().expect("python3 runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(
        screenshot.is_file(),
        "no screenshot at {}",
        screenshot.display()
    );
}
