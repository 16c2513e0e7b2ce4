//! The rules in force: one immutable [`Snapshot`] (a `weir_config::RuleSet` and its metric
//! counters) swapped whole on reload, and the [`ConfigStatus`] that the admin API, logs and
//! metrics report. A reload validates the new files completely before the swap; **a bad
//! file keeps the old rules** and records the error. Limiter state lives in the store under
//! each rule's key, so a rule that did not change keeps its counts across a swap, and a
//! changed one carries its state over as `weir-core` defines.
//!
//! What triggers a reload (file watch, poll, admin call) is in `reload.rs`.

use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use serde::Serialize;
use tokio::sync::watch;
use weir_config::{ConfigError, RuleSet};
use weir_core::Clock;

use crate::metrics::{Metrics, RuleCounters};
use crate::shared_clock::SharedClock;

/// The rules one decision uses, never changed after it is built.
#[derive(Debug)]
pub struct Snapshot {
    /// The rules.
    pub rules: RuleSet,
    /// Their decision counters.
    pub counters: RuleCounters,
    /// Which load this is: 1 at startup, +1 per successful reload.
    pub generation: u64,
}

/// The state of the configuration, as the admin API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ConfigStatus {
    /// The file or directory, or `(built-in example)`.
    pub source: String,
    /// The generation in force.
    pub generation: u64,
    /// When the rules in force were loaded, in Unix milliseconds.
    pub loaded_at_unix_ms: u64,
    /// When the last reload was attempted, in Unix milliseconds.
    pub last_attempt_unix_ms: u64,
    /// Whether the last attempt succeeded.
    pub last_ok: bool,
    /// The last attempt's error, if it failed.
    pub last_error: Option<String>,
    /// Successful reloads since startup.
    pub reloads_ok: u64,
    /// Failed reloads since startup.
    pub reloads_failed: u64,
    /// Rules in force.
    pub rules: usize,
    /// Domains in force.
    pub domains: Vec<String>,
}

/// A check of a loaded rule set: `Err(reason)` refuses it.
pub type RuleCheck = fn(&weir_config::RuleSet) -> Result<(), String>;

/// Where the rules come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSource {
    /// The documented example rules (`RuleSet::example()`), used when no `--config` is given.
    Example,
    /// A rule file or a directory of them (its `*.yaml` / `*.yml` files).
    Path(PathBuf),
    /// envoyproxy/ratelimit's runtime directory: every file under it, in subdirectories
    /// too, whatever its name (`runtime_dir.rs`).
    Runtime {
        /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`.
        dir: PathBuf,
        /// Skip entries whose name starts with a dot (ratelimit's
        /// `RUNTIME_IGNOREDOTFILES`).
        ignore_dotfiles: bool,
        /// Merge a domain defined in several files (ratelimit's `MERGE_DOMAIN_CONFIG`);
        /// without it that is an error.
        merge_domains: bool,
    },
    /// Rules an xDS management server sends (envoyproxy/ratelimit's
    /// `CONFIG_TYPE=GRPC_XDS_SOTW`): none until its first update, each update put in force
    /// by [`RuleBook::apply`]; nothing is read from disk, so a reload changes nothing.
    Xds {
        /// The management server's address, for logs and `/admin/config`.
        server: String,
    },
    /// Rules built into the binary (e.g. `weir proxy`'s example rules), named for errors.
    Inline {
        /// The name errors and `/admin/config` show.
        name: &'static str,
        /// The YAML.
        yaml: &'static str,
    },
}

impl RuleSource {
    /// The [`stamp`](crate::stamp) of what this source loads (0 for rules built into the
    /// binary).
    pub(crate) fn stamp(&self) -> u64 {
        match self {
            RuleSource::Path(path) => crate::stamp::stamp(path),
            RuleSource::Runtime {
                dir,
                ignore_dotfiles,
                ..
            } => {
                let files = crate::runtime_dir::files(dir, *ignore_dotfiles);
                // A directory that cannot be listed stamps differently from any listing.
                files.map_or(1, crate::stamp::stamp_files)
            }
            _ => 0,
        }
    }

    /// Loads the rules (blocking file I/O).
    pub fn load(&self) -> Result<RuleSet, ConfigError> {
        match self {
            RuleSource::Example => Ok(RuleSet::example()),
            RuleSource::Path(path) => RuleSet::load(path),
            RuleSource::Runtime {
                dir,
                ignore_dotfiles,
                merge_domains,
            } => crate::runtime_dir::load(dir, *ignore_dotfiles, *merge_domains),
            RuleSource::Inline { name, yaml } => RuleSet::parse(name, yaml),
            RuleSource::Xds { .. } => Ok(RuleSet::default()),
        }
    }

    fn describe(&self) -> String {
        match self {
            RuleSource::Example => "(built-in example)".to_string(),
            RuleSource::Path(path) | RuleSource::Runtime { dir: path, .. } => {
                path.display().to_string()
            }
            RuleSource::Inline { name, .. } => format!("(built-in {name})"),
            RuleSource::Xds { server } => format!("(xDS from {server})"),
        }
    }
}

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The new rules are in force, with this generation.
    Swapped(u64),
    /// The files are invalid; the old rules stay. The error names file, place and reason.
    Kept(String),
}

/// The rules in force and their status. Shared by every request.
#[derive(Debug)]
pub struct RuleBook {
    source: RuleSource,
    validate: Option<RuleCheck>,
    current: RwLock<Arc<Snapshot>>,
    status: Mutex<ConfigStatus>,
    changed: watch::Sender<u64>,
    /// The [`stamp`](crate::stamp) of the files as the last load attempt read them.
    stamp: AtomicU64,
    metrics: Arc<Metrics>,
    clock: SharedClock,
    /// This book among all of the process's, for the threads' copies (never reused).
    id: u64,
    /// The generation in force, read without the lock by [`RuleBook::snapshot_here`].
    generation: AtomicU64,
}

/// The next [`RuleBook`]'s id.
static BOOKS: AtomicU64 = AtomicU64::new(1);

fn unix_ms(clock: &SharedClock) -> u64 {
    clock.now_ns() / 1_000_000
}

impl RuleBook {
    /// Loads the rules once; an error here stops the server from starting. `validate`, if
    /// any, is a further check the rules must pass, now and on every reload.
    pub async fn open(
        source: RuleSource,
        validate: Option<RuleCheck>,
        metrics: Arc<Metrics>,
        clock: SharedClock,
    ) -> Result<RuleBook, ConfigError> {
        let (files, rules) = load(&source, validate).await;
        let rules = rules?;
        warn_if_empty(&source, &rules);
        let now = unix_ms(&clock);
        // Rules from xDS are not loaded yet: the first update is the first load counted.
        if !matches!(source, RuleSource::Xds { .. }) {
            metrics.initial_rules(rules.rules().len());
        }
        let status = ConfigStatus {
            source: source.describe(),
            generation: 1,
            loaded_at_unix_ms: now,
            last_attempt_unix_ms: now,
            last_ok: true,
            last_error: None,
            reloads_ok: 0,
            reloads_failed: 0,
            rules: rules.rules().len(),
            domains: rules.domains().map(str::to_string).collect(),
        };
        let snapshot = Snapshot {
            counters: metrics.rule_counters(&rules),
            rules,
            generation: 1,
        };
        Ok(RuleBook {
            source,
            validate,
            current: RwLock::new(Arc::new(snapshot)),
            status: Mutex::new(status),
            changed: watch::channel(1).0,
            stamp: AtomicU64::new(files),
            metrics,
            clock,
            id: BOOKS.fetch_add(1, Ordering::Relaxed),
            generation: AtomicU64::new(1),
        })
    }

    /// The rules in force now, through this thread's own copy ([`RuleSet::fork`]): what
    /// every decision takes. A copy is made when a thread first decides under a
    /// generation and kept for its next requests, so that a request writes no count that
    /// another core writes (the read lock and the shared `Arc`'s count cost more than the
    /// rest of the match on two cores, issue 31). A reload is seen by each thread on its
    /// next request after it; a thread keeps the copies of its last few books.
    pub fn snapshot_here(&self) -> Arc<Snapshot> {
        /// Books a thread keeps a copy of (an engine has one; tests run several).
        const KEPT: usize = 4;
        thread_local! {
            static HELD: RefCell<Vec<(u64, Arc<Snapshot>)>> = const { RefCell::new(Vec::new()) };
        }
        let generation = self.generation.load(Ordering::Acquire);
        let fresh = || {
            let shared = self.snapshot();
            Arc::new(Snapshot {
                rules: shared.rules.fork(),
                counters: shared.counters.clone(),
                generation: shared.generation,
            })
        };
        HELD.with(|held| {
            let Ok(mut held) = held.try_borrow_mut() else {
                return self.snapshot();
            };
            match held.iter_mut().find(|(book, _)| *book == self.id) {
                Some((_, copy)) if copy.generation == generation => Arc::clone(copy),
                Some((_, copy)) => {
                    *copy = fresh();
                    Arc::clone(copy)
                }
                None => {
                    let copy = fresh();
                    if held.len() == KEPT {
                        held.remove(0);
                    }
                    held.push((self.id, Arc::clone(&copy)));
                    copy
                }
            }
        })
    }

    /// The rules in force now. Cheap: one `Arc` clone under a read lock.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        let current = self.current.read().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(&current)
    }

    /// The configuration's status.
    pub fn status(&self) -> ConfigStatus {
        self.status
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Where the rules come from.
    pub fn source(&self) -> &RuleSource {
        &self.source
    }

    /// A receiver that sees the number of reload attempts grow (tests wait on it).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The [`stamp`](crate::stamp) of the rule files as the last load attempt read them: the watcher
    /// reloads when what is on disk differs.
    pub fn stamp(&self) -> u64 {
        self.stamp.load(Ordering::Acquire)
    }

    /// Reads and validates the rules again; swaps them in only if they are valid. Rules
    /// from xDS are not read again: they change when the management server sends an update.
    pub async fn reload(&self, trigger: &'static str) -> ReloadOutcome {
        if let RuleSource::Xds { server } = &self.source {
            return ReloadOutcome::Kept(format!(
                "the rules come from the xDS management server {server}: they change when it \
                 sends an update"
            ));
        }
        let (files, loaded) = load(&self.source, self.validate).await;
        self.stamp.store(files, Ordering::Release);
        self.install(loaded, trigger)
    }

    /// Puts rules loaded elsewhere (an xDS update) in force exactly as a reload would: the
    /// same validation, the same status, log and metrics; rules that fail keep the rules in
    /// force, and the error is returned for the sender (an xDS NACK).
    pub fn apply(
        &self,
        loaded: Result<RuleSet, ConfigError>,
        trigger: &'static str,
    ) -> ReloadOutcome {
        let origin = PathBuf::from(self.source.describe());
        let loaded = loaded.and_then(|rules| check(rules, self.validate, origin));
        self.install(loaded, trigger)
    }

    /// Whether the rules wait for a first update from xDS (not ready meanwhile): the reason.
    pub fn waiting(&self) -> Option<String> {
        let RuleSource::Xds { server } = &self.source else {
            return None;
        };
        (self.status().reloads_ok == 0)
            .then(|| format!("no rules received yet from the xDS management server {server}"))
    }

    fn install(
        &self,
        loaded: Result<RuleSet, ConfigError>,
        trigger: &'static str,
    ) -> ReloadOutcome {
        let now = unix_ms(&self.clock);
        let outcome = match loaded {
            Ok(rules) => {
                warn_if_empty(&self.source, &rules);
                let count = rules.rules().len();
                let domains = rules.domains().map(str::to_string).collect();
                let generation = {
                    let mut current = self.current.write().unwrap_or_else(PoisonError::into_inner);
                    let generation = current.generation.saturating_add(1);
                    *current = Arc::new(Snapshot {
                        counters: self.metrics.rule_counters(&rules),
                        rules,
                        generation,
                    });
                    self.generation.store(generation, Ordering::Release);
                    generation
                };
                let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
                status.generation = generation;
                status.loaded_at_unix_ms = now;
                status.last_attempt_unix_ms = now;
                status.last_ok = true;
                status.last_error = None;
                status.reloads_ok = status.reloads_ok.saturating_add(1);
                status.rules = count;
                status.domains = domains;
                drop(status);
                self.metrics.reload(true, count);
                tracing::info!(trigger, generation, rules = count, "rules reloaded");
                ReloadOutcome::Swapped(generation)
            }
            Err(error) => {
                let message = error.to_string();
                let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
                status.last_attempt_unix_ms = now;
                status.last_ok = false;
                status.last_error = Some(message.clone());
                status.reloads_failed = status.reloads_failed.saturating_add(1);
                drop(status);
                self.metrics.reload(false, 0);
                tracing::warn!(trigger, error = %message, "rules not reloaded: keeping the rules in force");
                ReloadOutcome::Kept(message)
            }
        };
        self.changed
            .send_modify(|attempts| *attempts = attempts.wrapping_add(1));
        outcome
    }
}

/// A runtime directory that holds no domain (empty or missing) serves, as ratelimit does,
/// every domain as unknown: said loudly, at start and at each reload that finds it so.
fn warn_if_empty(source: &RuleSource, rules: &RuleSet) {
    if !rules.is_empty() {
        return;
    }
    match source {
        RuleSource::Runtime { dir, .. } => tracing::warn!(
            dir = %dir.display(),
            "the runtime directory holds no rule file: no domain is configured, so every \
             request is answered OK without a limit (as envoyproxy/ratelimit does) until rule \
             files appear there; they are loaded as they appear"
        ),
        RuleSource::Xds { server } => tracing::warn!(
            %server,
            "no rate limit configuration from the xDS management server yet (or it sent none): \
             no domain is configured, so every request is answered OK without a limit, and the \
             server is not ready until a first update is in force"
        ),
        _ => {}
    }
}

/// `rules` if they pass `validate`, else the refusal as an error from `origin`.
fn check(
    rules: RuleSet,
    validate: Option<RuleCheck>,
    origin: PathBuf,
) -> Result<RuleSet, ConfigError> {
    match validate {
        Some(check) => check(&rules)
            .map(|()| rules)
            .map_err(|reason| ConfigError::Rejected { origin, reason }),
        None => Ok(rules),
    }
}

/// Loads on the blocking pool (rule files are read with std I/O), with the stamp of the
/// files taken just before: a change during the load shows as a stamp that differs. Rules
/// that load but fail `validate` are an error like a bad file.
async fn load(
    source: &RuleSource,
    validate: Option<RuleCheck>,
) -> (u64, Result<RuleSet, ConfigError>) {
    let source = source.clone();
    let describe = source.describe();
    let origin = PathBuf::from(&describe);
    let read = move || {
        let files = source.stamp();
        let loaded = source
            .load()
            .and_then(|rules| check(rules, validate, origin));
        (files, loaded)
    };
    match tokio::task::spawn_blocking(read).await {
        Ok(loaded) => loaded,
        Err(join) => (
            0,
            Err(ConfigError::Io {
                file: PathBuf::from(describe),
                source: std::io::Error::other(join.to_string()),
            }),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: &str = "domain: DOMAIN\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n";

    fn rules(domain: &str) -> RuleSet {
        RuleSet::parse("xds:test", &RULES.replace("DOMAIN", domain)).unwrap()
    }

    fn refuse_forbidden(rules: &RuleSet) -> Result<(), String> {
        match rules.domains().any(|d| d == "forbidden") {
            true => Err("domain 'forbidden' is not allowed here".to_string()),
            false => Ok(()),
        }
    }

    #[tokio::test]
    async fn xds_updates_go_through_the_reload_checks_and_a_refused_one_keeps_the_rules() {
        let source = RuleSource::Xds {
            server: "127.0.0.1:18000".to_string(),
        };
        let metrics = Arc::new(Metrics::new("memory"));
        let book = RuleBook::open(
            source,
            Some(refuse_forbidden),
            metrics,
            SharedClock::default(),
        )
        .await
        .unwrap();
        assert!(book.snapshot().rules.is_empty());
        assert!(book.waiting().unwrap().contains("127.0.0.1:18000"));

        assert_eq!(book.apply(Ok(rules("a")), "xds"), ReloadOutcome::Swapped(2));
        assert_eq!(book.waiting(), None);

        // The same further check as a reload of files: refused, the rules in force stay.
        let ReloadOutcome::Kept(error) = book.apply(Ok(rules("forbidden")), "xds") else {
            panic!("a refused update is kept out");
        };
        assert!(error.contains("not allowed here"), "{error}");
        let broken = RuleSet::parse("xds:broken", "domain: b\ndescriptors: 7\n");
        assert!(matches!(book.apply(broken, "xds"), ReloadOutcome::Kept(_)));
        let snapshot = book.snapshot();
        assert_eq!(snapshot.generation, 2);
        assert_eq!(snapshot.rules.domains().collect::<Vec<_>>(), ["a"]);
        let status = book.status();
        assert_eq!((status.reloads_ok, status.reloads_failed), (1, 2));

        // A reload (the admin API's) reads nothing and changes nothing.
        assert!(matches!(book.reload("admin").await, ReloadOutcome::Kept(_)));
        assert_eq!(book.snapshot().generation, 2);
        assert_eq!(book.status().reloads_failed, 2);
    }

    #[tokio::test]
    async fn a_threads_copy_is_its_own_and_a_reload_reaches_it_on_the_next_request() {
        let source = RuleSource::Xds {
            server: "127.0.0.1:18000".to_string(),
        };
        let metrics = Arc::new(Metrics::new("memory"));
        let book = RuleBook::open(source, None, metrics, SharedClock::default())
            .await
            .unwrap();
        assert_eq!(book.apply(Ok(rules("a")), "xds"), ReloadOutcome::Swapped(2));
        let (here, shared) = (book.snapshot_here(), book.snapshot());
        assert_eq!(here.generation, 2);
        assert_eq!(here.rules.rules(), shared.rules.rules());
        // The copy's ids are its own allocations, kept for the thread's next request.
        assert!(!Arc::ptr_eq(
            &here.rules.rules()[0].id,
            &shared.rules.rules()[0].id
        ));
        assert!(Arc::ptr_eq(&here, &book.snapshot_here()));
        // Another thread gets a copy of its own.
        let there = std::thread::scope(|s| s.spawn(|| book.snapshot_here()).join().unwrap());
        assert!(!Arc::ptr_eq(&here, &there));
        assert_eq!(there.rules.rules(), here.rules.rules());
        // A reload is seen on the next request; a refused one changes nothing.
        assert_eq!(book.apply(Ok(rules("b")), "xds"), ReloadOutcome::Swapped(3));
        let after = book.snapshot_here();
        assert_eq!(after.generation, 3);
        assert_eq!(after.rules.domains().collect::<Vec<_>>(), ["b"]);
        assert!(matches!(
            book.apply(
                RuleSet::parse("xds:broken", "domain: c\ndescriptors: 7\n"),
                "xds"
            ),
            ReloadOutcome::Kept(_)
        ));
        assert!(Arc::ptr_eq(&after, &book.snapshot_here()));
        // Two books on one thread keep a copy each.
        let other = RuleBook::open(
            RuleSource::Xds {
                server: "127.0.0.1:18001".to_string(),
            },
            None,
            Arc::new(Metrics::new("memory")),
            SharedClock::default(),
        )
        .await
        .unwrap();
        assert_eq!(
            other.apply(Ok(rules("o")), "xds"),
            ReloadOutcome::Swapped(2)
        );
        assert_eq!(
            other.snapshot_here().rules.domains().collect::<Vec<_>>(),
            ["o"]
        );
        assert!(Arc::ptr_eq(&after, &book.snapshot_here()));
    }
}
