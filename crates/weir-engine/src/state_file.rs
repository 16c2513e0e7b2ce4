//! The memory store's state file (`EngineSettings::state_file`, `weir serve --state-file`):
//! its limited, blocked and locked-out keys kept across a restart, so an attacker who can
//! crash the process or wait out a deploy does not start fresh. Not on the path of a
//! decision: `Engine::open` reads the file once, before anything is served; a background
//! task (`Engine::spawn_background`) writes it every `state_interval`; and a front end
//! writes it once more after draining (`Engine::save_state`). The engine hands this
//! module its store, rules and clock ([`StateSaver`]), so this module needs no engine.
//!
//! - **What**: `MemoryStore::export_limited` under the rules in force (weir-core's
//!   `store/memory/snapshot.rs` says what "limited" is and the format).
//! - **How**: written atomically: a temporary file in the same directory (mode 0600: keys
//!   name clients), fsync, rename over the old file, fsync of the directory. A crash at
//!   any point leaves the old file or the new one, never half of one. The temporary file
//!   a killed process left behind (`.{name}.{pid}.tmp`, its pid no longer running) is
//!   removed when the file is next read.
//! - **Reading**: a missing file is a first start; a file that is corrupt, truncated,
//!   foreign, too large or of a newer version is reported (a WARN naming the file and why)
//!   and ignored: the engine starts fresh and the next save replaces it. Records are
//!   validated one by one (rule no longer in force, expired during the downtime, invalid:
//!   dropped and counted).
//! - **Only the memory store**: a network store keeps its records outside the process
//!   already, so a state file with one is refused at start (`EngineError::StateFile`).

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use weir_core::{Clock, MemoryStore, Rule, StateSnapshot, MAX_SNAPSHOT_BYTES};

use crate::error::EngineError;
use crate::rules::RuleBook;
use crate::settings::EngineSettings;
use crate::shared_clock::SharedClock;
use crate::store_url::StoreSpec;

/// The shortest interval between two periodic saves ([`EngineSettings::state_interval`] is
/// raised to it; `weir serve --state-interval` refuses less).
pub const MIN_STATE_INTERVAL: Duration = Duration::from_millis(10);

/// Where the memory store's state is kept, and the lock that orders its writes.
#[derive(Debug)]
pub(crate) struct StateFile {
    path: PathBuf,
    every: Duration,
    /// Held from the export to the rename: a later save never lands before an earlier one.
    writing: Mutex<()>,
}

impl StateFile {
    /// The settings' state file, checked: only with the memory store, in a directory that
    /// exists. `None` without one.
    pub(crate) fn open(settings: &EngineSettings) -> Result<Option<Arc<StateFile>>, EngineError> {
        let Some(path) = &settings.state_file else {
            return Ok(None);
        };
        let refuse = |why: String| Err(EngineError::StateFile(why));
        if let StoreSpec::Network { .. } = settings.store {
            return refuse(format!(
                "a state file ({}) is for the memory store only: the {} store keeps its \
                 records outside this process, so they survive a restart of Weir already",
                path.display(),
                settings.store.kind()
            ));
        }
        if path.file_name().is_none() || path.is_dir() {
            return refuse(format!("{} is not a file name", path.display()));
        }
        let dir = parent(path);
        if !dir.is_dir() {
            return refuse(format!(
                "{}: the directory {} does not exist",
                path.display(),
                dir.display()
            ));
        }
        Ok(Some(Arc::new(StateFile {
            path: path.clone(),
            every: settings.state_interval.max(MIN_STATE_INTERVAL),
            writing: Mutex::new(()),
        })))
    }

    /// Reads the file into `store` (before anything is served). Never fails: a file that
    /// cannot be used is reported and the store starts empty.
    pub(crate) fn load(&self, store: &MemoryStore, rules: &RuleBook, now_ns: u64) {
        let file = self.path.display().to_string();
        remove_leftovers(&self.path);
        let bytes = match read_bounded(&self.path) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => {
                tracing::info!(
                    %file,
                    "no state file yet: starting fresh (it is written every {:?} and at shutdown)",
                    self.every
                );
                return;
            }
            Err(error) => {
                tracing::warn!(%file, %error, "state file ignored: cannot read it; starting fresh");
                return;
            }
        };
        let snapshot = match StateSnapshot::decode(&bytes) {
            Ok(snapshot) => snapshot,
            Err(error) => {
                tracing::warn!(
                    %file,
                    %error,
                    "state file ignored, starting fresh (the next save replaces it)"
                );
                return;
            }
        };
        let report = store.import(&snapshot, now_ns, rules_by_scope(rules));
        if let Some(why) = &report.first_invalid {
            tracing::warn!(%file, invalid = report.invalid, first = %why, "state file: invalid records dropped");
        }
        tracing::info!(
            %file,
            restored = report.restored,
            expired = report.expired,
            no_rule = report.no_rule,
            invalid = report.invalid,
            refused = report.refused,
            saved_at_unix_ms = snapshot.taken_ns / 1_000_000,
            "state file read: limited, blocked and locked-out keys restored"
        );
    }

    /// Exports `store`'s limited records under the rules in force and writes them
    /// atomically. Returns how many records were written.
    fn save(&self, store: &MemoryStore, rules: &RuleBook, now_ns: u64) -> std::io::Result<usize> {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        let snapshot = store.export_limited(now_ns, rules_by_scope(rules));
        let bytes = snapshot.encode().map_err(std::io::Error::other)?;
        write_atomically(&self.path, &bytes)?;
        Ok(snapshot.records.len())
    }
}

/// What writing the state file needs, gathered by the engine (`Engine::save_state`, and
/// the periodic task `Engine::spawn_background` starts).
#[derive(Debug, Clone)]
pub(crate) struct StateSaver {
    pub(crate) file: Arc<StateFile>,
    pub(crate) store: MemoryStore,
    pub(crate) rules: Arc<RuleBook>,
    pub(crate) clock: SharedClock,
}

impl StateSaver {
    /// Writes the file now (off the runtime's threads); a failure is also logged (WARN,
    /// naming the file: the previous file stays). Returns how many records were written.
    pub(crate) async fn save(&self) -> std::io::Result<usize> {
        let saver = self.clone();
        let saved = tokio::task::spawn_blocking(move || {
            let now_ns = saver.clock.now_ns();
            saver.file.save(&saver.store, &saver.rules, now_ns)
        })
        .await
        .unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())));
        let file = self.file.path.display().to_string();
        match &saved {
            Ok(records) => tracing::debug!(%file, records, "state file written"),
            Err(error) => tracing::warn!(
                %file,
                %error,
                "state file not written (the previous one stays)"
            ),
        }
        saved
    }

    /// Writes the file every interval (the first one interval after start).
    pub(crate) fn spawn(self) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(self.file.every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await; // the first tick is at once: the file was just read
            loop {
                tick.tick().await;
                let _ = self.save().await;
            }
        })
    }
}

/// The rules in force by scope (a record is judged under its scope's rule).
fn rules_by_scope(rules: &RuleBook) -> impl Fn(u64) -> Option<Rule> {
    let snapshot = rules.snapshot();
    let by_scope: HashMap<u64, Rule> = snapshot
        .rules
        .rules()
        .iter()
        .filter_map(|info| info.rule())
        .map(|rule| (rule.scope(), *rule))
        .collect();
    move |scope| by_scope.get(&scope).copied()
}

/// The directory a path is in (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// The file's bytes, `None` if it does not exist; a file above the snapshot bound is read
/// only that far (and refused by the decoder for its size).
fn read_bounded(path: &Path) -> std::io::Result<Option<Vec<u8>>> {
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(MAX_SNAPSHOT_BYTES + 1).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}

/// The name of the temporary file a process writes `path` through: `.{name}.{pid}.tmp`
/// beside it.
fn temporary_of(path: &Path, pid: u32) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    parent(path).join(format!(".{name}.{pid}.tmp"))
}

/// Removes the temporary files that processes killed in the middle of a save left beside
/// `path` (a process that is still running keeps its own: two engines given one state file
/// do not delete each other's). Linux only: elsewhere, whether a pid runs is not asked.
fn remove_leftovers(path: &Path) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let (prefix, suffix) = (format!(".{name}."), ".tmp");
    let Ok(entries) = std::fs::read_dir(parent(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(pid) = file_name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix.as_str()))
            .and_then(|n| n.strip_suffix(suffix))
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        let running = Path::new("/proc").join(pid.to_string()).exists();
        if running {
            continue;
        }
        let leftover = entry.path();
        match std::fs::remove_file(&leftover) {
            Ok(()) => tracing::info!(
                file = %leftover.display(),
                "removed a temporary state file left by a process stopped in the middle of a save"
            ),
            Err(error) => tracing::warn!(
                file = %leftover.display(),
                %error,
                "cannot remove a temporary state file left by a stopped process"
            ),
        }
    }
}

/// Writes `bytes` to a temporary file beside `path`, syncs it, renames it over `path`, and
/// syncs the directory; the temporary file is removed if any step fails.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = parent(path);
    let temporary = temporary_of(path, std::process::id());
    let written = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(&temporary)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temporary, path)?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}
