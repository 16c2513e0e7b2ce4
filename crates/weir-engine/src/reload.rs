//! When the rules are read again: a watch on the config's **parent directory** (inotify via
//! `notify`; events are debounced) plus a periodic poll, both comparing a [`stamp`] of what
//! is on disk with the stamp at the last attempt. Watching the parent sees atomic renames
//! (`mv new.yaml rules.yaml`) and Kubernetes ConfigMap symlink swaps (`..data` re-pointed),
//! which a watch on the file itself would miss; the poll catches what the watch cannot
//! (inotify limits, network filesystems). The reload itself is `RuleBook::reload`, which
//! records the stamp of what it read.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::rules::{RuleBook, RuleSource};
pub use crate::stamp::stamp;

/// How the watcher behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReloadSettings {
    /// Whether to watch with inotify at all (the poll runs regardless).
    pub watch: bool,
    /// How long the files must stay quiet after an event before they are read (default
    /// 200 ms): an editor's or `kubectl`'s burst of writes becomes one reload.
    pub debounce: Duration,
    /// How often to compare the stamp anyway (default 5 s).
    pub poll: Duration,
}

impl Default for ReloadSettings {
    fn default() -> Self {
        Self {
            watch: true,
            debounce: Duration::from_millis(200),
            poll: Duration::from_secs(5),
        }
    }
}

async fn stamp_async(source: RuleSource) -> u64 {
    tokio::task::spawn_blocking(move || source.stamp())
        .await
        .unwrap_or(0)
}

/// Directories to watch for `path`: its parent (renames, symlink swaps), and the path
/// itself when it is a directory (files added, edited or removed inside).
fn watch_dirs(path: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    dirs.push(parent);
    if path.is_dir() {
        dirs.push(path.to_path_buf());
    }
    dirs
}

/// Starts the watch (if enabled) and the poll for `book`'s source, as one task. Returns
/// `None` for the built-in example, which never changes. Abort the task to stop it.
pub fn spawn(book: Arc<RuleBook>, settings: ReloadSettings) -> Option<tokio::task::JoinHandle<()>> {
    let source = book.source().clone();
    let path = match &source {
        RuleSource::Path(path) | RuleSource::Runtime { dir: path, .. } => path.clone(),
        _ => return None,
    };
    let (tx, mut rx) = mpsc::channel::<()>(1);
    let watcher = if settings.watch {
        start_watcher(&path, tx)
    } else {
        None
    };
    Some(tokio::spawn(async move {
        let _watcher = watcher; // dropped (and stopped) with the task
        let mut poll = tokio::time::interval(settings.poll.max(Duration::from_millis(10)));
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        poll.tick().await; // the first tick is immediate
        loop {
            let trigger = tokio::select! {
                Some(()) = rx.recv() => {
                    // Debounce: wait until the directory is quiet.
                    while let Ok(Some(())) = tokio::time::timeout(settings.debounce, rx.recv()).await {}
                    "watch"
                }
                _ = poll.tick() => "poll",
            };
            // Reload only when the files differ from what the last attempt read (a bad
            // file is reported once, not on every poll).
            if stamp_async(source.clone()).await != book.stamp() {
                book.reload(trigger).await;
            }
        }
    }))
}

fn start_watcher(path: &Path, tx: mpsc::Sender<()>) -> Option<notify::RecommendedWatcher> {
    use notify::Watcher as _;
    let handler = move |event: notify::Result<notify::Event>| {
        if event.is_ok() {
            // A full channel already holds a wake-up: nothing is lost.
            let _ = tx.try_send(());
        }
    };
    let mut watcher = match notify::recommended_watcher(handler) {
        Ok(w) => w,
        Err(error) => {
            tracing::warn!(%error, "cannot watch the rule files; polling only");
            return None;
        }
    };
    for dir in watch_dirs(path) {
        if let Err(error) = watcher.watch(&dir, notify::RecursiveMode::NonRecursive) {
            tracing::warn!(%error, dir = %dir.display(), "cannot watch; polling only");
        }
    }
    Some(watcher)
}
