//! When the rules are read again: a watch on the config's **parent directory** (inotify via
//! `notify`; events are debounced) plus a periodic poll, both comparing a [`stamp`] of what
//! is on disk with the stamp at the last attempt. Watching the parent sees atomic renames
//! (`mv new.yaml rules.yaml`) and Kubernetes ConfigMap symlink swaps (`..data` re-pointed),
//! which a watch on the file itself would miss; the poll catches what the watch cannot
//! (inotify limits, network filesystems). The reload itself is `RuleBook::reload`, which
//! records the stamp of what it read.

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use crate::rules::{RuleBook, RuleSource};

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

/// A fingerprint of the rule files: for the path and each rule file in it, the resolved
/// target's identity (device, inode), size, modification time and a hash of the content.
/// Any change to what `RuleSet::load` would read changes it. Blocking I/O.
pub fn stamp(path: &Path) -> u64 {
    let files = match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => rule_files(path),
        Ok(_) => vec![path.to_path_buf()],
        Err(_) => Vec::new(),
    };
    stamp_files(files)
}

/// The [`stamp`] of what `source` loads (0 for rules built into the binary).
pub(crate) fn stamp_source(source: &RuleSource) -> u64 {
    match source {
        RuleSource::Path(path) => stamp(path),
        RuleSource::Runtime {
            dir,
            ignore_dotfiles,
        } => {
            let files = crate::runtime_dir::files(dir, *ignore_dotfiles);
            // A directory that cannot be listed stamps differently from any listing.
            files.map_or(1, stamp_files)
        }
        _ => 0,
    }
}

fn stamp_files(files: Vec<PathBuf>) -> u64 {
    let mut hasher = foldhash::quality::FixedState::with_seed(0x5745_4952).build_hasher();
    hasher.write_usize(files.len());
    for file in files {
        hasher.write(file.as_os_str().as_encoded_bytes());
        if let Ok(target) = std::fs::canonicalize(&file) {
            hasher.write(target.as_os_str().as_encoded_bytes());
        }
        if let Ok(meta) = std::fs::metadata(&file) {
            write_identity(&mut hasher, &meta);
        }
        match std::fs::read(&file) {
            Ok(bytes) => hasher.write(&bytes),
            Err(e) => hasher.write(e.to_string().as_bytes()),
        }
    }
    hasher.finish()
}

#[cfg(unix)]
fn write_identity(hasher: &mut impl Hasher, meta: &std::fs::Metadata) {
    use std::os::unix::fs::MetadataExt;
    hasher.write_u64(meta.dev());
    hasher.write_u64(meta.ino());
    hasher.write_u64(meta.size());
    hasher.write_i64(meta.mtime());
    hasher.write_i64(meta.mtime_nsec());
}

#[cfg(not(unix))]
fn write_identity(hasher: &mut impl Hasher, meta: &std::fs::Metadata) {
    hasher.write_u64(meta.len());
    if let Ok(Ok(since)) = meta
        .modified()
        .map(|m| m.duration_since(std::time::UNIX_EPOCH))
    {
        hasher.write_u128(since.as_nanos());
    }
}

/// The rule files of a directory as `RuleSet::load` picks them (sorted, no hidden files).
fn rule_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or(".");
            let yaml = p
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e == "yaml" || e == "yml");
            !name.starts_with('.') && yaml
        })
        .take(100_000)
        .collect();
    files.sort();
    files
}

async fn stamp_async(source: RuleSource) -> u64 {
    tokio::task::spawn_blocking(move || stamp_source(&source))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stamp_sees_content_renames_and_nothing_else() {
        let dir = std::env::temp_dir().join(format!("weir-stamp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("rules.yaml");
        std::fs::write(&file, "a").unwrap();
        let first = stamp(&file);
        assert_eq!(stamp(&file), first, "stable when nothing changed");
        std::fs::write(dir.join("next.yaml"), "a").unwrap();
        std::fs::rename(dir.join("next.yaml"), &file).unwrap();
        assert_ne!(
            stamp(&file),
            first,
            "an atomic rename with equal content is seen"
        );
        let dir_stamp = stamp(&dir);
        std::fs::write(dir.join(".hidden.yaml"), "x").unwrap();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        assert_eq!(
            stamp(&dir),
            dir_stamp,
            "files the loader ignores are ignored"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
