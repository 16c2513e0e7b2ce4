//! `weir serve --state-file` end to end (issue 16): the built binary locks a key out (the
//! lockout rule tripped through `weir decide`) and an admin blocks another; killed with
//! SIGKILL once the periodic save has written them, then stopped with SIGTERM (the final
//! save), it comes back with both still locked out; `weir proxy` keeps a block through
//! SIGTERM alike. A corrupt file is reported (a WARN
//! naming the file and why) and the server decides from scratch; a state file with a
//! network store or in a missing directory is refused at start. Every wait is bounded: the
//! file is polled until it holds what the test wrote, never slept on.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{serve, spawn_logged, spawn_logged_with_env, terminate, weir, Served};
use weir_core::StateSnapshot;

const RULES: &str = "\
domain: login
descriptors:
  - key: user
    rule:
      algorithm: sliding_log
      limit: 2
      window: 1h
      lockout:
        duration: 1h
      name: login_lockout
";
const TOKEN: &str = "state-file-test-token-0123456789";

/// A directory of its own (removed when dropped), with the rules and the admin token.
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("weir-cli-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rules.yaml"), RULES).unwrap();
        std::fs::write(dir.join("token"), TOKEN).unwrap();
        Self(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }

    fn serve(&self, interval: &str) -> Served {
        serve(&[
            "--config",
            &self.path("rules.yaml"),
            "--admin-token-file",
            &self.path("token"),
            "--state-file",
            &self.path("state"),
            "--state-interval",
            interval,
        ])
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `weir decide` for `user`: `OK` or `OVER_LIMIT`.
fn decide(served: &Served, user: &str) -> String {
    let out = weir(&[
        "decide",
        "--server",
        &served.http,
        "--domain",
        "login",
        "--descriptor",
        &format!("user={user}"),
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines().next().unwrap_or_default().to_string()
}

/// An admin call on `user`'s key, its JSON answer.
fn admin(served: &Served, path: &str, user: &str, extra: &str) -> serde_json::Value {
    let body =
        format!(r#"{{"domain":"login","entries":[{{"key":"user","value":"{user}"}}]{extra}}}"#);
    admin_call(served, path, &body)
}

/// `POST path` on the admin API with `body`, its JSON answer.
fn admin_call(served: &Served, path: &str, body: &str) -> serde_json::Value {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = runtime
        .block_on(weir_server::client::send(
            &served.http,
            "POST",
            path,
            Some(body),
            Some(TOKEN),
            Duration::from_secs(10),
        ))
        .unwrap();
    assert_eq!(answer.status, 200, "{path}: {}", answer.body);
    serde_json::from_str(&answer.body).unwrap()
}

/// Locked out or blocked for most of an hour still.
fn assert_blocked(served: &Served, user: &str, strikes: u64) {
    let usage = admin(served, "/admin/keys/inspect", user, "");
    let blocked_ms = usage["blocked_for_ms"].as_u64().unwrap();
    assert!(blocked_ms > 50 * 60 * 1000, "{user}: {usage}");
    assert_eq!(usage["strikes"].as_u64(), Some(strikes), "{user}: {usage}");
}

/// The records the state file holds, once it holds at least `n` (polled, at most 20 s).
fn wait_for_records(file: &Path, n: usize) -> usize {
    for _ in 0..2000 {
        if let Ok(bytes) = std::fs::read(file) {
            if let Ok(snapshot) = StateSnapshot::decode(&bytes) {
                if snapshot.records.len() >= n {
                    return snapshot.records.len();
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10)); // a real file written by a real process
    }
    panic!("{} did not hold {n} records within 20 s", file.display());
}

#[test]
fn lockouts_and_blocks_survive_sigkill_and_sigterm() {
    let dir = Dir::new("state");
    let file = dir.0.join("state");

    // 1. Alice trips the lockout; an admin blocks Mallory for an hour.
    let mut first = dir.serve("100ms");
    assert_eq!(decide(&first, "alice"), "OK");
    assert_eq!(decide(&first, "alice"), "OK");
    assert_eq!(decide(&first, "alice"), "OVER_LIMIT");
    admin(
        &first,
        "/admin/keys/block",
        "mallory",
        r#","duration_ms":3600000"#,
    );
    // Bob has one request of two left: not limited, never written.
    assert_eq!(decide(&first, "bob"), "OK");
    assert_blocked(&first, "alice", 1);
    // The periodic save has written both: then the process dies without a word.
    assert_eq!(wait_for_records(&file, 2), 2);
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    drop(first);

    // 2. Back after SIGKILL: both still held. An interval too long to save before the
    // SIGTERM below: what Carol does is kept by the final save alone.
    let second = dir.serve("1h");
    assert_blocked(&second, "alice", 1);
    assert_blocked(&second, "mallory", 0);
    assert_eq!(decide(&second, "alice"), "OVER_LIMIT");
    assert_eq!(
        decide(&second, "bob"),
        "OK",
        "bob was not written, so starts fresh"
    );
    assert_eq!(decide(&second, "carol"), "OK");
    assert_eq!(decide(&second, "carol"), "OK");
    assert_eq!(decide(&second, "carol"), "OVER_LIMIT");
    let status = terminate(second);
    assert!(status.success(), "{status:?}");

    // 3. Back after SIGTERM: all three.
    let third = dir.serve("1h");
    assert_blocked(&third, "alice", 1);
    assert_blocked(&third, "mallory", 0);
    assert_blocked(&third, "carol", 1);
    assert_eq!(decide(&third, "carol"), "OVER_LIMIT");
    let status = terminate(third);
    assert!(status.success(), "{status:?}");
}

#[test]
fn a_corrupt_state_file_is_reported_and_ignored() {
    let dir = Dir::new("corrupt");
    let file = dir.path("state");
    std::fs::write(&file, "WEIRSNAP, then nothing a snapshot holds").unwrap();
    let served = dir.serve("1h");
    let warned = served
        .logs
        .iter()
        .find(|line| line.contains("state file ignored"))
        .unwrap_or_else(|| panic!("no WARN about the state file: {:#?}", served.logs));
    let event: serde_json::Value = serde_json::from_str(warned).unwrap();
    assert_eq!(event["level"], "WARN", "{warned}");
    assert_eq!(event["fields"]["file"], file.as_str(), "{warned}");
    assert!(warned.contains("announces"), "names why: {warned}");
    // Decided from scratch.
    assert_eq!(decide(&served, "alice"), "OK");
    assert_eq!(decide(&served, "alice"), "OK");
    assert_eq!(decide(&served, "alice"), "OVER_LIMIT");
    let status = terminate(served);
    assert!(status.success(), "{status:?}");
    // The final save replaced it with a snapshot that reads.
    assert_eq!(wait_for_records(Path::new(&file), 1), 1);
}

#[test]
fn a_state_file_is_refused_with_a_network_store_or_a_missing_directory() {
    let dir = Dir::new("refused");
    let start = |extra: &[&str]| {
        let mut args = vec!["serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"];
        args.extend_from_slice(extra);
        let out = weir(&args);
        assert!(!out.status.success(), "{out:?}");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let state = dir.path("state");
    let network = start(&["--store", "redis://127.0.0.1:1", "--state-file", &state]);
    assert!(network.contains("memory store only"), "{network}");
    let missing = dir.path("no-such-dir/state");
    let stderr = start(&["--state-file", &missing]);
    assert!(stderr.contains("does not exist"), "{stderr}");
}

#[test]
fn weir_proxy_keeps_a_block_across_a_restart() {
    let dir = Dir::new("proxy");
    // The upstream is never reached: only the API listener is asked.
    let proxy = || {
        spawn_logged(
            &[
                "proxy",
                "--upstream",
                "http://127.0.0.1:1",
                "--listen",
                "127.0.0.1:0",
                "--api",
                "127.0.0.1:0",
                "--admin-token-file",
                &dir.path("token"),
                "--state-file",
                &dir.path("state"),
                "--state-interval",
                "1h",
            ],
            "api",
        )
    };
    // One crawler IP blocked for an hour (config/proxy.yaml's rule on it).
    let key = r#"{"domain":"proxy","entries":[{"key":"class","value":"crawler"},{"key":"remote_address","value":"192.0.2.7"}]"#;
    let first = proxy();
    admin_call(
        &first,
        "/admin/keys/block",
        &format!(r#"{key},"duration_ms":3600000}}"#),
    );
    let status = terminate(first);
    assert!(status.success(), "{status:?}");
    let second = proxy();
    let usage = admin_call(&second, "/admin/keys/inspect", &format!("{key}}}"));
    assert!(
        usage["blocked_for_ms"].as_u64().unwrap() > 50 * 60 * 1000,
        "{usage}"
    );
    assert!(terminate(second).success());
}

/// The signal handlers are installed before the server says it listens: a SIGTERM at once
/// still drains and saves (it used to find no handler and kill the process).
#[test]
fn a_sigterm_right_after_start_still_saves() {
    let dir = Dir::new("early");
    for _ in 0..5 {
        let _ = std::fs::remove_file(dir.0.join("state"));
        let status = terminate(dir.serve("1h"));
        assert!(status.success(), "{status:?}");
        assert_eq!(wait_for_records(&dir.0.join("state"), 0), 0);
    }
}

/// Issue 26: a state file in a directory every local user may write was used without a
/// word (one of them made a root `weir serve` overwrite a root-owned file through it).
/// Now refused at start, naming the directory and the way out; accepted with
/// `--state-file-allow-shared-dir` or its variable.
#[test]
fn a_directory_others_may_write_is_refused_unless_allowed() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Dir::new("shared");
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o1777)).unwrap();
    let state = dir.path("state");
    let out = weir(&[
        "serve",
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--state-file",
        &state,
    ]);
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("may be written by everyone"), "{stderr}");
    assert!(stderr.contains(&dir.0.display().to_string()), "{stderr}");
    assert!(stderr.contains("--state-file-allow-shared-dir"), "{stderr}");

    let allowed = serve(&["--state-file", &state, "--state-file-allow-shared-dir"]);
    assert!(terminate(allowed).success());
    // The variable, as every option has one.
    let allowed = spawn_logged_with_env(
        &[
            "serve",
            "--http",
            "127.0.0.1:0",
            "--grpc",
            "127.0.0.1:0",
            "--state-file",
            &state,
        ],
        "http",
        &[("WEIR_STATE_FILE_ALLOW_SHARED_DIR", "true")],
    );
    assert!(terminate(allowed).success());
}

/// Issue 26: a forged state file was believed up to 20 years ahead. A 19-year lockout of
/// a rule whose lockout lasts an hour comes back as the hour, with a WARN counting it.
#[test]
fn a_forged_lockout_comes_back_as_the_rules_lockout_at_most() {
    let dir = Dir::new("forged");
    let file = dir.0.join("state");
    let first = dir.serve("1h");
    assert_eq!(decide(&first, "alice"), "OK");
    assert_eq!(decide(&first, "alice"), "OK");
    assert_eq!(decide(&first, "alice"), "OVER_LIMIT");
    assert!(terminate(first).success());

    let mut snapshot = StateSnapshot::decode(&std::fs::read(&file).unwrap()).unwrap();
    let record = &mut snapshot.records[0].record;
    let guard = record.guard.as_deref_mut().unwrap();
    let year_ns = 365 * 24 * 3_600_000_000_000u64;
    guard.blocked_until_ns += 19 * year_ns;
    guard.strikes_expire_ns += 19 * year_ns;
    record.expires_ns = guard.strikes_expire_ns;
    std::fs::write(&file, snapshot.encode().unwrap()).unwrap();

    let second = dir.serve("1h");
    let usage = admin(&second, "/admin/keys/inspect", "alice", "");
    let blocked_ms = usage["blocked_for_ms"].as_u64().unwrap();
    assert!(
        (50 * 60 * 1000..=60 * 60 * 1000).contains(&blocked_ms),
        "{usage}"
    );
    let warned = second
        .logs
        .iter()
        .find(|line| line.contains("clamped to it"))
        .unwrap_or_else(|| panic!("no WARN about the clamp: {:#?}", second.logs));
    assert!(warned.contains("\"clamped\":1"), "{warned}");
    assert!(terminate(second).success());
}
