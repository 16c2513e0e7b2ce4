//! The engine's state file: a lockout and a block survive closing one engine and opening
//! another on the same file (the periodic save and the final one write the same file); a
//! lockout that ended during the downtime is gone; a corrupt file is ignored; a temporary
//! file a killed save left is removed at the next start; a state file
//! with a network store or in a missing directory is refused. Under a `ManualClock`.

#![allow(clippy::unwrap_used, clippy::panic)] // tests state expectations by panicking

use std::path::{Path, PathBuf};
use std::time::Duration;

use weir_config::Descriptor;
use weir_core::ManualClock;
use weir_engine::{
    CheckRequest, Code, Engine, EngineError, EngineSettings, SharedClock, StoreSpec,
};

const T0: u64 = 1_700_000_000_000_000_000;

/// A directory of its own for one test (removed when dropped).
struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("weir-state-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn settings(clock: &ManualClock, file: &Path) -> EngineSettings {
    let mut settings = EngineSettings::default(); // the example rules: login_lockout
    settings.clock = SharedClock::new(clock.clone());
    settings.state_file = Some(file.to_path_buf());
    settings.reload.watch = false;
    settings
}

fn login(account: &str) -> CheckRequest {
    CheckRequest {
        domain: "api".into(),
        descriptors: vec![Descriptor::new([("login_failures", account)])],
        hits_addend: 1,
    }
}

async fn code(engine: &Engine, account: &str) -> Code {
    engine.decide(&login(account)).await.unwrap().overall
}

#[tokio::test]
async fn a_lockout_survives_a_restart_and_ends_on_time() {
    let dir = Dir::new("lockout");
    let file = dir.0.join("state.bin");
    let clock = ManualClock::new(T0);
    let engine = Engine::open(settings(&clock, &file)).await.unwrap();
    // Five failures in a minute, then the sixth locks the account out for 5 minutes.
    for _ in 0..5 {
        assert_eq!(code(&engine, "alice").await, Code::Ok);
    }
    assert_eq!(code(&engine, "alice").await, Code::OverLimit);
    // A key that is not limited is not written.
    assert_eq!(code(&engine, "bob").await, Code::Ok);
    assert_eq!(engine.save_state().await.unwrap().unwrap(), 1);
    drop(engine);

    // A minute later: still locked out (the log's window is over, the lockout is not).
    clock.advance(Duration::from_secs(60));
    let restarted = Engine::open(settings(&clock, &file)).await.unwrap();
    assert_eq!(code(&restarted, "alice").await, Code::OverLimit);
    // Bob starts fresh: five more failures before a lockout, as for anyone.
    for _ in 0..5 {
        assert_eq!(code(&restarted, "bob").await, Code::Ok);
    }
    restarted.save_state().await.unwrap().unwrap();
    drop(restarted);

    // Down past the end of Alice's lockout: it is gone.
    clock.advance(Duration::from_secs(300));
    let later = Engine::open(settings(&clock, &file)).await.unwrap();
    assert_eq!(code(&later, "alice").await, Code::Ok);
}

#[tokio::test]
async fn a_corrupt_file_is_ignored_and_replaced() {
    let dir = Dir::new("corrupt");
    let file = dir.0.join("state.bin");
    std::fs::write(&file, b"WEIRSNAP but then not a snapshot at all").unwrap();
    let clock = ManualClock::new(T0);
    let engine = Engine::open(settings(&clock, &file)).await.unwrap();
    assert_eq!(code(&engine, "alice").await, Code::Ok);
    engine.save_state().await.unwrap().unwrap();
    let bytes = std::fs::read(&file).unwrap();
    assert!(weir_core::StateSnapshot::decode(&bytes).is_ok());
    // No temporary file is left beside it.
    let names: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["state.bin"]);
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_temporary_file_left_by_a_killed_save_is_removed_at_the_next_start() {
    let dir = Dir::new("leftover");
    let file = dir.0.join("state.bin");
    // A pid above any pid_max (2^22): no such process runs.
    let dead = dir.0.join(".state.bin.4999999.tmp");
    std::fs::write(&dead, b"half a snapshot").unwrap();
    // A running process's own temporary file (this test's) stays: it may be mid-save.
    let live = dir.0.join(format!(".state.bin.{}.tmp", std::process::id()));
    std::fs::write(&live, b"being written").unwrap();
    // Not a state file's temporary: left alone.
    let other = dir.0.join(".other.bin.4999999.tmp");
    std::fs::write(&other, b"not ours").unwrap();
    let clock = ManualClock::new(T0);
    let engine = Engine::open(settings(&clock, &file)).await.unwrap();
    assert!(
        !dead.exists(),
        "the dead process's temporary file is removed"
    );
    assert!(live.exists(), "a running process's temporary file is kept");
    assert!(other.exists(), "another file's temporary is kept");
    drop(engine);
}

#[tokio::test]
async fn a_state_file_needs_the_memory_store_and_an_existing_directory() {
    let dir = Dir::new("refused");
    let clock = ManualClock::new(T0);
    let mut network = settings(&clock, &dir.0.join("state.bin"));
    network.store = StoreSpec::parse("redis://127.0.0.1:1").unwrap();
    let error = Engine::open(network).await.unwrap_err();
    assert!(matches!(error, EngineError::StateFile(_)), "{error}");
    assert!(error.to_string().contains("memory store only"), "{error}");

    let missing = settings(&clock, &dir.0.join("no-such-dir/state.bin"));
    let error = Engine::open(missing).await.unwrap_err();
    assert!(error.to_string().contains("does not exist"), "{error}");

    let directory = settings(&clock, &dir.0);
    let error = Engine::open(directory).await.unwrap_err();
    assert!(error.to_string().contains("not a file name"), "{error}");
}

/// The key and rule `account`'s failed logins are counted under (the example rules).
fn login_key(engine: &Engine, account: &str) -> (weir_core::Key, weir_core::Rule) {
    let snapshot = engine.rules().snapshot();
    let matched = snapshot
        .rules
        .matches("api", &login(account).descriptors)
        .unwrap();
    let matched = matched[0].as_ref().unwrap();
    (matched.key.clone(), *matched.rule().unwrap())
}

/// How long `account` is told to wait (locked out or blocked).
async fn retry_after(engine: &Engine, account: &str) -> Duration {
    let verdict = engine.decide(&login(account)).await.unwrap();
    assert_eq!(verdict.overall, Code::OverLimit);
    verdict.statuses[0].decision.as_ref().unwrap().retry_after
}

/// Issue 26: the temporary file was `.NAME.PID.tmp`, opened with create + truncate,
/// following links: a link planted there by another user made the save overwrite the
/// link's target (a root-owned file, for a root `weir serve`), and the rename then put the
/// link in the state file's place. Now it is created exclusively, never through a link,
/// under a name no one can guess; a link at the state file's own path is neither read nor
/// written through (the rename replaces it).
#[cfg(unix)]
#[tokio::test]
async fn links_planted_beside_the_state_file_are_never_written_through_nor_read() {
    let dir = Dir::new("planted");
    let file = dir.0.join("state.bin");
    let victim = dir.0.join("victim");
    std::fs::write(&victim, b"root's own file").unwrap();
    let old_name = dir.0.join(format!(".state.bin.{}.tmp", std::process::id()));
    std::os::unix::fs::symlink(&victim, &old_name).unwrap();
    let clock = ManualClock::new(T0);
    let engine = Engine::open(settings(&clock, &file)).await.unwrap();
    for _ in 0..6 {
        code(&engine, "alice").await;
    }
    assert_eq!(engine.save_state().await.unwrap().unwrap(), 1);
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's own file");
    assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
    let saved = std::fs::read(&file).unwrap();
    drop(engine);

    // A link at the state file's path, to a snapshot someone else wrote: not read.
    std::fs::write(&victim, &saved).unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&victim, &file).unwrap();
    let engine = Engine::open(settings(&clock, &file)).await.unwrap();
    assert_eq!(
        code(&engine, "alice").await,
        Code::Ok,
        "the link was not read"
    );
    engine.save_state().await.unwrap().unwrap();
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        saved,
        "nor written through"
    );
    assert!(!std::fs::symlink_metadata(&file).unwrap().is_symlink());
}

/// Issue 26: a state file in a directory any user may write was used without a word.
#[cfg(unix)]
#[tokio::test]
async fn a_directory_others_may_write_is_refused_unless_the_operator_allows_it() {
    use std::os::unix::fs::PermissionsExt;
    let dir = Dir::new("shared");
    let file = dir.0.join("state.bin");
    let clock = ManualClock::new(T0);
    for (mode, who) in [
        (0o777, "everyone"),
        (0o1777, "everyone"),
        (0o770, "its group"),
    ] {
        std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(mode)).unwrap();
        let error = Engine::open(settings(&clock, &file)).await.unwrap_err();
        assert!(matches!(error, EngineError::StateFile(_)), "{error}");
        let text = error.to_string();
        assert!(text.contains(&format!("may be written by {who}")), "{text}");
        assert!(text.contains("--state-file-allow-shared-dir"), "{text}");
        let mut allowed = settings(&clock, &file);
        allowed.state_file_allow_shared_dir = true;
        let engine = Engine::open(allowed).await.unwrap();
        engine.save_state().await.unwrap().unwrap();
    }
    std::fs::set_permissions(&dir.0, std::fs::Permissions::from_mode(0o700)).unwrap();
    Engine::open(settings(&clock, &file)).await.unwrap();
}

/// Issue 26: a forged state file was believed up to 20 years ahead: a 19-year lockout on
/// the example login rule, whose lockout lasts at most an hour. Now at most the hour.
#[tokio::test]
async fn a_forged_nineteen_year_lockout_restores_as_the_rules_max() {
    let dir = Dir::new("forged");
    let file = dir.0.join("state.bin");
    let clock = ManualClock::new(T0);
    let engine = Engine::open(settings(&clock, &file)).await.unwrap();
    for _ in 0..6 {
        code(&engine, "alice").await;
    }
    assert_eq!(
        retry_after(&engine, "alice").await,
        Duration::from_secs(300)
    );
    engine.save_state().await.unwrap().unwrap();
    drop(engine);

    let mut snapshot = weir_core::StateSnapshot::decode(&std::fs::read(&file).unwrap()).unwrap();
    let guard = snapshot.records[0].record.guard.as_deref_mut().unwrap();
    let nineteen_years = 19 * 365 * 24 * 3_600_000_000_000u64;
    guard.blocked_until_ns = T0 + nineteen_years;
    guard.strikes_expire_ns = guard.blocked_until_ns + 24 * 3_600_000_000_000;
    snapshot.records[0].record.expires_ns = guard.strikes_expire_ns;
    std::fs::write(&file, snapshot.encode().unwrap()).unwrap();

    let restarted = Engine::open(settings(&clock, &file)).await.unwrap();
    assert_eq!(
        retry_after(&restarted, "alice").await,
        Duration::from_secs(3600)
    );
}

/// Issue 26: an admin block of 2^64 - 1 ms lay beyond the import's 20-year horizon and was
/// dropped on restart: the key walked free. Now it survives, as the longest block the
/// admin API allows ([`weir_engine::MAX_BLOCK`]).
#[tokio::test]
async fn an_endless_admin_block_survives_a_restart_as_the_maximum() {
    let dir = Dir::new("endless");
    let file = dir.0.join("state.bin");
    let clock = ManualClock::new(T0);
    let engine = Engine::open(settings(&clock, &file)).await.unwrap();
    let (key, rule) = login_key(&engine, "mallory");
    engine
        .limiter()
        .block(&key, &rule, Duration::from_millis(u64::MAX))
        .await
        .unwrap();
    assert_eq!(engine.save_state().await.unwrap().unwrap(), 1);
    drop(engine);
    clock.advance(Duration::from_secs(60));
    let restarted = Engine::open(settings(&clock, &file)).await.unwrap();
    assert_eq!(
        retry_after(&restarted, "mallory").await,
        weir_engine::MAX_BLOCK
    );
}
