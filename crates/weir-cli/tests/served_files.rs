//! What a running `weir serve` makes of files that are not rule files planted in the rule
//! directory it serves (issue 26, item 5): a FIFO named `*.yaml`, a link to `/dev/zero`
//! and a 300 MB file. The reload fingerprint used to read them raw (`std::fs::read`): the
//! FIFO hung every reload and then SIGTERM, `/dev/zero` grew the process by gigabytes, and
//! the large file was read whole on every poll. Now the fingerprint reads through the
//! loader's one safe reader (`weir_config::file::read_regular`): each reload is refused at
//! once with an error naming the file, the old rules stay in force, nothing grows, and
//! SIGTERM stops the process. Every wait is bounded (a client deadline, SIGTERM's 20 s).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{serve, terminate, weir, Served};

const RULES: &str = "\
domain: a
descriptors:
  - key: user
    rule:
      algorithm: fixed_window
      limit: 1
      window: 1h
";
const TOKEN: &str = "served-files-test-token-0123456789";

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `POST /admin/reload`, answered within 10 s: its status and JSON.
fn reload(served: &Served) -> (u16, serde_json::Value) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime
        .block_on(weir_server::client::send(
            &served.http,
            "POST",
            "/admin/reload",
            None,
            Some(TOKEN),
            Duration::from_secs(10),
        ))
        .expect("the reload answers within 10 s");
    (answer.status, serde_json::from_str(&answer.body).unwrap())
}

/// A reload refused with an error naming `file` and containing `why`.
fn assert_refused(served: &Served, file: &Path, why: &str) {
    let (status, body) = reload(served);
    assert_eq!(status, 422, "{body}");
    let error = body["error"].as_str().unwrap();
    assert!(error.contains(&file.display().to_string()), "{error}");
    assert!(error.contains(why), "{error}");
}

/// A field of `/proc/PID/<file>` (`VmRSS:` in kB, `rchar:` in bytes).
fn proc_field(served: &Served, file: &str, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{}/{file}", served.child.id())).unwrap();
    let line = text.lines().find(|l| l.starts_with(field)).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// `weir decide` on domain `a`: `OK` or `OVER_LIMIT`.
fn decide(served: &Served, user: &str) -> String {
    let out = weir(&[
        "decide",
        "--server",
        &served.http,
        "--domain",
        "a",
        "--descriptor",
        &format!("user={user}"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().unwrap_or_default().to_string()
}

#[test]
fn a_fifo_a_device_and_a_huge_file_in_the_served_directory_are_refused_unread() {
    let dir = Dir(std::env::temp_dir().join(format!("weir-cli-served-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    let rules = dir.0.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join("a.yaml"), RULES).unwrap();
    let token = dir.0.join("token");
    std::fs::write(&token, TOKEN).unwrap();
    let served = serve(&[
        "--config",
        &rules.display().to_string(),
        "--admin-token-file",
        &token.display().to_string(),
        "--reload-poll",
        "50ms",
    ]);
    assert_eq!(decide(&served, "alice"), "OK");
    assert_eq!(decide(&served, "alice"), "OVER_LIMIT");

    // A FIFO: the fingerprint used to wait for a writer for ever.
    let fifo = rules.join("b.yaml");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    assert_refused(&served, &fifo, "a FIFO");
    std::fs::remove_file(&fifo).unwrap();

    // /dev/zero: the fingerprint used to read it until memory ran out.
    let zero = rules.join("c.yaml");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    assert_refused(&served, &zero, "a device");
    assert_refused(&served, &zero, "a device");
    let rss_kb = proc_field(&served, "status", "VmRSS:");
    assert!(rss_kb < 256 * 1024, "RSS {rss_kb} kB");
    std::fs::remove_file(&zero).unwrap();

    // 300 MB (sparse): refused by its size, never read, however often it is looked at.
    let huge = rules.join("d.yaml");
    std::fs::File::create(&huge)
        .unwrap()
        .set_len(300 << 20)
        .unwrap();
    assert_refused(&served, &huge, "above the maximum");
    let read_before = proc_field(&served, "io", "rchar:");
    for _ in 0..3 {
        assert_refused(&served, &huge, "above the maximum");
    }
    let read = proc_field(&served, "io", "rchar:") - read_before;
    assert!(read < 16 << 20, "{read} bytes read by three reloads");
    std::fs::remove_file(&huge).unwrap();

    // The old rules were in force throughout: alice is still over her limit.
    assert_eq!(decide(&served, "alice"), "OVER_LIMIT");
    let (status, body) = reload(&served);
    assert_eq!(status, 200, "{body}");
    let status = terminate(served);
    assert!(status.success(), "{status:?}");
}
