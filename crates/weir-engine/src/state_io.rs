//! The state file's file-system side, for `state_file.rs`: whether its directory may be
//! used ([`check_dir`]), reading it ([`read`]), writing it atomically ([`write_atomically`])
//! and removing what a killed save left ([`remove_leftovers`]). Not on the path of a
//! decision. What it guards against is another local user of the machine:
//!
//! - **The directory is Weir's alone.** A directory that its group or everyone may write
//!   (even with the sticky bit: there anyone may still create the state file's name
//!   first), or that a user other than Weir's own (or root) owns, is refused at start
//!   unless the operator says it is shared on purpose (`--state-file-allow-shared-dir`).
//! - **The temporary file cannot be steered.** It is created exclusively (`O_CREAT |
//!   O_EXCL`, and `O_NOFOLLOW`): a file or a link planted at its name is never opened,
//!   let alone written through. Its name, `.{name}.{pid}.{64 random bits}.tmp`, cannot be
//!   guessed, and a name taken is retried with new bits, a bounded number of times.
//! - **Reading never follows a link** at the state file's path, never waits on a FIFO and
//!   reads at most [`MAX_SNAPSHOT_BYTES`] (`weir_config::file::read_regular`).

use std::hash::BuildHasher as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use weir_config::file::{read_regular, FileError, Links};
use weir_core::MAX_SNAPSHOT_BYTES;

/// How many names a save tries for its temporary file before giving up (each taken name
/// was planted: 64 random bits do not collide by chance).
const ATTEMPTS: usize = 8;

/// The directory a path is in (`.` for a bare file name).
pub(crate) fn parent(path: &Path) -> &Path {
    path.parent()
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Why the state file's directory `dir` may not be used, if it may not: writable by its
/// group or by others, or owned by a user that is neither root nor this process's.
pub(crate) fn check_dir(dir: &Path) -> Result<(), String> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mode = meta.mode() & 0o7777;
        let writable = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (_, true) => Some("everyone"),
            (true, false) => Some("its group"),
            (false, false) => None,
        };
        if let Some(who) = writable {
            return Err(format!(
                "the directory {} may be written by {who} (mode {mode:o}): another user \
                 could plant files there, or replace the state file; give it to Weir's \
                 user alone (chmod go-w), or pass --state-file-allow-shared-dir \
                 (WEIR_STATE_FILE_ALLOW_SHARED_DIR) if it is shared on purpose",
                dir.display()
            ));
        }
        // Linux: /proc/self belongs to the process's effective user.
        if let Ok(me) = std::fs::metadata("/proc/self").map(|m| m.uid()) {
            if meta.uid() != me && meta.uid() != 0 {
                return Err(format!(
                    "the directory {} belongs to uid {}, neither this process's user \
                     (uid {me}) nor root: its owner could replace the state file; use a \
                     directory of Weir's user, or pass --state-file-allow-shared-dir \
                     (WEIR_STATE_FILE_ALLOW_SHARED_DIR)",
                    dir.display(),
                    meta.uid()
                ));
            }
        }
    }
    Ok(())
}

/// The state file's bytes, `None` if there is none yet (see the module header).
pub(crate) fn read(path: &Path) -> Result<Option<Vec<u8>>, FileError> {
    match read_regular(path, MAX_SNAPSHOT_BYTES, Links::Refuse) {
        Ok(bytes) => Ok(Some(bytes)),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}

/// The temporary file `pid` writes `path` through with these random bits.
fn temporary_of(path: &Path, pid: u32, bits: u64) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    parent(path).join(format!(".{name}.{pid}.{bits:016x}.tmp"))
}

/// 64 bits no other user can predict (std's `RandomState` keys come from the OS's random
/// source).
fn random_bits() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(std::process::id())
}

/// Creates a temporary file beside `path` for writing, mode 0600, exclusively and never
/// through a link, trying the names `bits` gives (at most [`ATTEMPTS`]).
fn create_temporary(
    path: &Path,
    bits: impl Iterator<Item = u64>,
) -> std::io::Result<(PathBuf, std::fs::File)> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
    }
    for bits in bits.take(ATTEMPTS) {
        let temporary = temporary_of(path, std::process::id(), bits);
        match options.open(&temporary) {
            Ok(file) => return Ok((temporary, file)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{ATTEMPTS} names for a temporary file in {} were taken already: someone is \
             planting files there",
            parent(path).display()
        ),
    ))
}

/// Writes `bytes` to a new temporary file beside `path`, syncs it, renames it over `path`
/// (a link at `path` is replaced, never followed), and syncs the directory; the temporary
/// file is removed if any step fails.
pub(crate) fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let (temporary, mut file) = create_temporary(path, std::iter::repeat_with(random_bits))?;
    let written = (|| {
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&temporary, path)?;
        std::fs::File::open(parent(path))?.sync_all()
    })();
    drop(file);
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// The pid in the name of a temporary file of `path` (`.{name}.{pid}.{bits}.tmp`, or
/// `.{name}.{pid}.tmp` as earlier versions named it), if `file_name` is one.
fn temporary_pid(path: &Path, file_name: &str) -> Option<u32> {
    let name = path.file_name()?.to_str()?;
    let rest = file_name
        .strip_prefix('.')?
        .strip_prefix(name)?
        .strip_prefix('.')?
        .strip_suffix(".tmp")?;
    let (pid, bits) = rest.split_once('.').unwrap_or((rest, ""));
    let bits_ok =
        bits.is_empty() || (bits.len() == 16 && bits.bytes().all(|b| b.is_ascii_hexdigit()));
    bits_ok.then(|| pid.parse().ok()).flatten()
}

/// Removes the temporary files that processes killed in the middle of a save left beside
/// `path` (a process that is still running keeps its own: two engines given one state file
/// do not delete each other's). Linux only: elsewhere, whether a pid runs is not asked.
pub(crate) fn remove_leftovers(path: &Path) {
    if !cfg!(target_os = "linux") {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent(path)) else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| temporary_pid(path, n))
        else {
            continue;
        };
        let running = Path::new("/proc").join(pid.to_string()).exists();
        if running {
            continue;
        }
        // A link is removed, not followed (`remove_file` unlinks the name).
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

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weir-state-io-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A link planted at whatever name the save tries is never written through: the save
    /// moves on to the next name, and after [`ATTEMPTS`] taken names fails saying why.
    #[test]
    fn a_link_at_the_temporary_name_is_never_written_through() {
        let dir = scratch("planted");
        let path = dir.join("state");
        let victim = dir.join("victim");
        std::fs::write(&victim, b"root's file").unwrap();
        let planted = temporary_of(&path, std::process::id(), 1);
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let (temporary, mut file) = create_temporary(&path, [1, 2].into_iter()).unwrap();
        assert_eq!(temporary, temporary_of(&path, std::process::id(), 2));
        file.write_all(b"snapshot").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
        // Every name taken: an error, and still nothing written through.
        let err = create_temporary(&path, std::iter::repeat(1)).unwrap_err();
        assert!(err.to_string().contains("were taken already"), "{err}");
        assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_others_may_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("modes");
        for (mode, refused) in [
            (0o700, None),
            (0o755, None),
            (0o775, Some("its group")),
            (0o1777, Some("everyone")),
        ] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let checked = check_dir(&dir);
            match refused {
                None => assert_eq!(checked, Ok(()), "{mode:o}"),
                Some(who) => assert!(checked.unwrap_err().contains(who), "{mode:o}"),
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn temporary_names_of_this_and_earlier_versions_are_recognised() {
        let path = Path::new("/x/state.bin");
        assert_eq!(temporary_pid(path, ".state.bin.42.tmp"), Some(42));
        assert_eq!(
            temporary_pid(path, ".state.bin.42.00000000000000ff.tmp"),
            Some(42)
        );
        assert_eq!(temporary_pid(path, ".state.bin.42.zz.tmp"), None);
        assert_eq!(temporary_pid(path, ".other.bin.42.tmp"), None);
        assert_eq!(temporary_pid(path, "state.bin"), None);
    }
}
