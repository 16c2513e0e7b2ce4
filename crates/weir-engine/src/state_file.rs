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
//!   name clients; created exclusively, never through a link, under a name no one can
//!   guess), fsync, rename over the old file, fsync of the directory. A crash at any point
//!   leaves the old file or the new one, never half of one. The temporary file a killed
//!   process left behind (`.{name}.{pid}.{bits}.tmp`, its pid no longer running) is
//!   removed when the file is next read. `state_io.rs` holds this file-system side.
//! - **Where**: a directory that exists and that no other user may write (group- or
//!   world-writable, or another user's, is refused at start unless
//!   `EngineSettings::state_file_allow_shared_dir`).
//! - **Reading**: a missing file is a first start; a file that is corrupt, truncated,
//!   foreign, too large, of a newer version, a link or not a regular file is reported (a
//!   WARN naming the file and why) and ignored: the engine starts fresh and the next save
//!   replaces it. Records are validated one by one (rule no longer in force, expired during
//!   the downtime, invalid: dropped and counted), and none is believed beyond what its rule
//!   allows: a lockout lasts at most the rule's lockout max, any other block at most
//!   [`MAX_BLOCK`], from the restart (clamped, counted, one WARN).
//! - **Only the memory store**: a network store keeps its records outside the process
//!   already, so a state file with one is refused at start (`EngineError::StateFile`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinHandle;
use weir_core::{Clock, MemoryStore, Rule, StateSnapshot};

use crate::block::MAX_BLOCK;
use crate::error::EngineError;
use crate::rules::RuleBook;
use crate::settings::EngineSettings;
use crate::shared_clock::SharedClock;
use crate::state_io::{check_dir, parent, read, remove_leftovers, write_atomically};
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
    /// Set while the file waits to be read until rules are in force (rules from xDS: read
    /// under no rules, every record would be dropped). No save replaces it meanwhile.
    deferred: AtomicBool,
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
        if !settings.state_file_allow_shared_dir {
            if let Err(why) = check_dir(dir) {
                return refuse(format!("{}: {why}", path.display()));
            }
        }
        Ok(Some(Arc::new(StateFile {
            path: path.clone(),
            every: settings.state_interval.max(MIN_STATE_INTERVAL),
            writing: Mutex::new(()),
            deferred: AtomicBool::new(false),
        })))
    }

    /// Reads the file only once rules are in force ([`StateFile::load_deferred`]); no
    /// save replaces it until then.
    pub(crate) fn defer(&self) {
        self.deferred.store(true, Ordering::Release);
        tracing::info!(
            file = %self.path.display(),
            "state file: read once the first rules are in force (limited, blocked and locked-out keys are judged under them)"
        );
    }

    /// Reads the deferred file now, if it still waits ([`StateFile::defer`]).
    pub(crate) fn load_deferred(&self, store: &MemoryStore, rules: &RuleBook, now_ns: u64) {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        if self.deferred.swap(false, Ordering::AcqRel) {
            self.load(store, rules, now_ns);
        }
    }

    /// Reads the file into `store` (before anything is served). Never fails: a file that
    /// cannot be used is reported and the store starts empty.
    pub(crate) fn load(&self, store: &MemoryStore, rules: &RuleBook, now_ns: u64) {
        let file = self.path.display().to_string();
        remove_leftovers(&self.path);
        let bytes = match read(&self.path) {
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
        let report = store.import(&snapshot, now_ns, MAX_BLOCK, rules_by_scope(rules));
        if let Some(why) = &report.first_invalid {
            tracing::warn!(%file, invalid = report.invalid, first = %why, "state file: invalid records dropped");
        }
        if let Some(why) = &report.first_clamped {
            tracing::warn!(
                %file,
                clamped = report.clamped,
                first = %why,
                "state file: records claiming more than their rule allows, clamped to it \
                 (a forged file, or a clock that went back)"
            );
        }
        tracing::info!(
            %file,
            restored = report.restored,
            expired = report.expired,
            no_rule = report.no_rule,
            invalid = report.invalid,
            refused = report.refused,
            clamped = report.clamped,
            saved_at_unix_ms = snapshot.taken_ns / 1_000_000,
            "state file read: limited, blocked and locked-out keys restored"
        );
    }

    /// Exports `store`'s limited records under the rules in force and writes them
    /// atomically. Returns how many records were written.
    fn save(&self, store: &MemoryStore, rules: &RuleBook, now_ns: u64) -> std::io::Result<usize> {
        let _writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        if self.deferred.load(Ordering::Acquire) {
            // Not read yet: what memory holds is not the state, and the file still is.
            return Ok(0);
        }
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
