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
