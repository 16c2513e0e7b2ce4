//! `weir admin` end to end (issue 29): the built binary runs every verb against a running
//! `weir serve` over real loopback sockets, reading the token from `WEIR_ADMIN_TOKEN` or
//! `--admin-token-file`; the exit status is 0 done, 1 an error, 2 a usage error, and the
//! token never shows in what it prints. Blocks and lockouts last minutes or hours, so no
//! answer depends on how fast the machine is.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

mod common;

use std::path::PathBuf;
use std::process::{Command, Output};

use common::{serve, terminate, Served};
use serde_json::Value;

const TOKEN: &str = "cli-admin-token-0123456789abcdef";

const RULES: &str = "\
domain: d
descriptors:
  - key: user
    rule: {algorithm: fixed_window, limit: 5, window: 1h}
  - key: login
    rule:
      algorithm: fixed_window
      limit: 1
      window: 1h
      lockout: {duration: 5m, max: 1h}
      on_failure: fail_closed
  - key: shadowed
    rule: {algorithm: fixed_window, limit: 1, window: 1h, shadow: true}
";

/// A scratch directory with the rules and the token file, removed at the end.
struct Files {
    dir: PathBuf,
}

impl Files {
    fn new(name: &str) -> Files {
        let dir = std::env::temp_dir().join(format!("weir-admin-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("rules.yaml"), RULES).unwrap();
        std::fs::write(dir.join("token"), format!("{TOKEN}\n")).unwrap();
        Files { dir }
    }

    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

impl Drop for Files {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start(files: &Files) -> Served {
    serve(&[
        "--config",
        &files.path("rules.yaml"),
        "--admin-token-file",
        &files.path("token"),
    ])
}

/// `weir admin ARGS` against `served`, the token in `WEIR_ADMIN_TOKEN` when `token` is given.
fn admin_with(served: &Served, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_weir"));
    command
        .arg("admin")
        .args(args)
        .env("WEIR_ADMIN_URL", format!("http://{}", served.http))
        .env_remove("WEIR_ADMIN_TOKEN")
        .env_remove("WEIR_ADMIN_TOKEN_FILE");
    if let Some(token) = token {
        command.env("WEIR_ADMIN_TOKEN", token);
    }
    let out = command.output().unwrap();
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(TOKEN), "the token is never printed: {all}");
    out
}

fn admin(served: &Served, args: &[&str]) -> String {
    let out = admin_with(served, Some(TOKEN), args);
    assert_eq!(out.status.code(), Some(0), "weir admin {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

fn check(served: &Served, entries: &str) -> i32 {
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args([
            "decide",
            "--server",
            &served.http,
            "--domain",
            "d",
            "-d",
            entries,
        ])
        .output()
        .unwrap();
    out.status.code().unwrap()
}

#[test]
fn every_admin_verb_works_against_a_running_server() {
    let files = Files::new("verbs");
    let served = start(&files);
    let alice = ["--domain", "d", "-d", "user=alice"];
    let with = |verb: &str, extra: &[&str]| {
        let mut args = vec![verb];
        args.extend_from_slice(&alice);
        args.extend_from_slice(extra);
        admin(&served, &args)
    };

    // rules: everything that decides how each rule limits.
    let rules = admin(&served, &["rules"]);
    assert!(rules.contains("generation 1, 3 rules"), "{rules}");
    assert!(
        rules.contains(
            "d.login     fixed_window 1 per 3600s, exact, lockout 300s escalating to 3600s, \
             on failure fail_closed\n"
        ),
        "{rules}"
    );
    assert!(
        rules.contains(
            "d.shadowed  fixed_window 1 per 3600s, exact, on failure local_fallback, shadow\n"
        ),
        "{rules}"
    );

    // inspect and peek read; neither consumes.
    assert_eq!(check(&served, "user=alice"), 0);
    assert_eq!(check(&served, "user=alice"), 0);
    let inspect = with("inspect", &[]);
    assert!(
        inspect.contains("d/user=alice under d.user: 2 of 5 used, 3 left"),
        "{inspect}"
    );
    for _ in 0..2 {
        let peek = with("peek", &[]);
        assert!(
            peek.contains("the next request would pass; 3 of 5 left"),
            "{peek}"
        );
    }

    // penalty and reward move the usage.
    let penalty = with("penalty", &["--units", "3"]);
    assert!(
        penalty.starts_with("added 3 unit(s) of usage\n"),
        "{penalty}"
    );
    assert!(penalty.contains("would be DENIED, retry in "), "{penalty}");
    assert_eq!(check(&served, "user=alice"), 2, "the penalty is enforced");
    let reward = with("reward", &["--units", "2"]);
    assert!(
        reward.contains("the next request would pass; 2 of 5 left"),
        "{reward}"
    );
    assert_eq!(check(&served, "user=alice"), 0);

    // block, blocked, unblock.
    let block = with("block", &["--for", "1h"]);
    assert_eq!(block, "d/user=alice under d.user: blocked for 3600s\n");
    assert_eq!(check(&served, "user=alice"), 2, "blocked");
    assert_eq!(check(&served, "login=mallory"), 0);
    assert_eq!(check(&served, "login=mallory"), 2, "locked out");
    let blocked = admin(&served, &["blocked"]);
    assert!(blocked.starts_with("2 key(s) blocked:\n"), "{blocked}");
    assert!(
        blocked.contains("  d/user=alice  d.user  for 3600s\n"),
        "{blocked}"
    );
    assert!(
        blocked.contains("  d/login=mallory  d.login  for 300s, 1 lockout strike(s)\n"),
        "{blocked}"
    );
    let one = admin(&served, &["blocked", "--limit", "1"]);
    assert!(
        one.starts_with("2 key(s) blocked, the 1 blocked longest:\n  d/user=alice"),
        "{one}"
    );
    let unblock = admin(
        &served,
        &["unblock", "--domain", "d", "-d", "login=mallory"],
    );
    assert!(unblock.contains("unblocked"), "{unblock}");
    assert_eq!(check(&served, "login=mallory"), 0, "may try again");

    // reset forgets everything, the block included.
    let reset = with("reset", &[]);
    assert!(
        reset.contains("reset: usage, block and strikes forgotten"),
        "{reset}"
    );
    assert!(with("inspect", &[]).contains("0 of 5 used"));
    assert!(admin(&served, &["blocked"]).starts_with("no key is blocked\n"));

    // top-denied: enforced denials first; the shadow rule's apart.
    assert_eq!(check(&served, "shadowed=sam"), 0);
    assert_eq!(check(&served, "shadowed=sam"), 0, "shadow: never enforced");
    let top = admin(&served, &["top-denied"]);
    let (enforced, shadow) = top.split_once("denied but not enforced").unwrap();
    assert!(
        enforced.starts_with("most denied keys (3 enforced denials since start):\n"),
        "{top}"
    );
    assert!(!enforced.contains("sam"), "{top}");
    assert!(shadow.contains("d/shadowed=sam"), "{top}");

    // reload, and --json for scripts.
    assert_eq!(admin(&served, &["reload"]), "reloaded: generation 2\n");
    let json: Value = serde_json::from_str(&admin(
        &served,
        &["--json", "peek", "--domain", "d", "-d", "user=alice"],
    ))
    .unwrap();
    assert_eq!(
        (json["allowed"].as_bool(), json["remaining"].as_u64()),
        (Some(true), Some(5))
    );

    assert!(terminate(served).success());
}

#[test]
fn the_token_comes_from_the_environment_or_a_file_never_a_flag() {
    let files = Files::new("token");
    let served = start(&files);

    // From a file (the flag, or its environment variable).
    let out = admin_with(
        &served,
        None,
        &["rules", "--admin-token-file", &files.path("token")],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // A flag with the token's value does not exist: a usage error (2).
    let out = admin_with(&served, None, &["rules", "--admin-token", TOKEN]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");

    // None, both, a wrong one, an empty file: errors (1) that say what to do.
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();
    let out = admin_with(&served, None, &["rules"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no admin token: set WEIR_ADMIN_TOKEN or give --admin-token-file"),
        "{}",
        stderr(&out)
    );
    let out = admin_with(
        &served,
        Some(TOKEN),
        &["rules", "--admin-token-file", &files.path("token")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not both"), "{}", stderr(&out));
    let out = admin_with(&served, Some("wrong-token-0123456789"), &["rules"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the server answered 401"),
        "{}",
        stderr(&out)
    );
    std::fs::write(files.dir.join("empty"), "\n").unwrap();
    let out = admin_with(
        &served,
        None,
        &["rules", "--admin-token-file", &files.path("empty")],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the admin token file is empty"),
        "{}",
        stderr(&out)
    );

    assert!(terminate(served).success());
}

#[test]
fn errors_exit_1_with_the_servers_reason_and_usage_errors_exit_2() {
    let files = Files::new("errors");
    let served = start(&files);
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();

    // No rule matches: the server's reason.
    let out = admin_with(
        &served,
        Some(TOKEN),
        &["inspect", "--domain", "d", "-d", "nothing=x"],
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        stderr(&out).contains(
            "the server answered 404 to /admin/keys/inspect: no rule matches these entries"
        ),
        "{}",
        stderr(&out)
    );
    // Usage: a missing descriptor, zero units, an unknown verb, a malformed duration.
    for args in [
        &["inspect", "--domain", "d"][..],
        &["penalty", "--domain", "d", "-d", "user=a", "--units", "0"],
        &["promote"],
        &["block", "--domain", "d", "-d", "user=a", "--for", "soon"],
    ] {
        let out = admin_with(&served, Some(TOKEN), args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
    // A server without the admin API says so.
    let plain = serve(&["--config", &files.path("rules.yaml")]);
    let out = admin_with(&plain, Some(TOKEN), &["rules"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("the server has no admin API"),
        "{}",
        stderr(&out)
    );
    assert!(terminate(plain).success());
    // No server at all.
    let addr = served.http.clone();
    assert!(terminate(served).success());
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["admin", "--server", &format!("http://{addr}"), "rules"])
        .env("WEIR_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(&format!("asking the server at {addr}")),
        "{}",
        stderr(&out)
    );
    // HTTPS is refused, saying why.
    let out = Command::new(env!("CARGO_BIN_EXE_weir"))
        .args(["admin", "--server", "https://127.0.0.1:1", "rules"])
        .env("WEIR_ADMIN_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("plain HTTP only"), "{}", stderr(&out));
}
