//! The one way Weir reads a file an operator names ([`read_regular`]): rule files (the
//! loader, `weir check-config`, the reload fingerprint), the state file and the admin token
//! file. Not on the path of a decision: files are read at start and on reload only.
//!
//! What it guarantees, whatever sits at the path: only a **regular file** is read (a FIFO,
//! a device, a socket or a directory is an error saying which, found by `stat` before the
//! file is opened and again by `fstat` on what was opened, so a swap in between is caught);
//! opening never waits (`O_NONBLOCK`: a FIFO swapped in has no writer to wait for); at most
//! `max` bytes are read (a larger file is refused by its size before a byte is read, and a
//! file growing meanwhile is cut at `max + 1` and refused); and with [`Links::Refuse`] a
//! symbolic link at the path is refused (`O_NOFOLLOW`) rather than followed.

use std::io::Read as _;
use std::path::Path;

/// Whether a symbolic link at the path itself is followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Links {
    /// Followed, to a regular file (Kubernetes mounts ConfigMaps and Secrets through links).
    Follow,
    /// Refused: for a file Weir itself writes (the state file), where a link was planted
    /// by someone else.
    Refuse,
}

/// Why [`read_regular`] read nothing. The messages do not name the file: the caller does.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileError {
    /// The file could not be opened or read (missing, no permission, a dangling or looping
    /// link, an I/O error).
    #[error("cannot read: {0}")]
    Io(#[source] std::io::Error),
    /// What is at the path is not a regular file.
    #[error("not a regular file ({0})")]
    NotRegular(&'static str),
    /// A symbolic link, with [`Links::Refuse`].
    #[error("a symbolic link, which is not followed here")]
    Symlink,
    /// Larger than the bound.
    #[error("{len} bytes or more, above the maximum of {max}")]
    TooLarge {
        /// Its size in bytes (or how much was read before giving up).
        len: u64,
        /// The largest size accepted.
        max: u64,
    },
}

impl FileError {
    /// Whether nothing is at the path (a first start for a state file).
    pub fn is_not_found(&self) -> bool {
        matches!(self, FileError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    }
}

/// The bytes of the regular file at `path`, at most `max` of them (see the module header
/// for what is refused and why). Blocking I/O.
///
/// ```
/// use weir_config::file::{read_regular, FileError, Links};
/// let err = read_regular(std::path::Path::new("/dev/zero"), 1024, Links::Follow).unwrap_err();
/// assert!(matches!(err, FileError::NotRegular("a device")), "{err}");
/// ```
pub fn read_regular(path: &Path, max: u64, links: Links) -> Result<Vec<u8>, FileError> {
    let meta = match links {
        Links::Follow => std::fs::metadata(path),
        Links::Refuse => std::fs::symlink_metadata(path),
    }
    .map_err(FileError::Io)?;
    check(&meta, max)?;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let nofollow = match links {
            Links::Follow => 0,
            Links::Refuse => libc::O_NOFOLLOW,
        };
        options.custom_flags(libc::O_NONBLOCK | nofollow);
    }
    let handle = options.open(path).map_err(|e| {
        // O_NOFOLLOW on a link (swapped in since the stat) fails with ELOOP.
        let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
        if links == Links::Refuse && link {
            FileError::Symlink
        } else {
            FileError::Io(e)
        }
    })?;
    let opened = handle.metadata().map_err(FileError::Io)?;
    check(&opened, max)?;
    let mut bytes = Vec::new();
    handle
        .take(max.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(FileError::Io)?;
    let len = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    if len > max {
        return Err(FileError::TooLarge { len, max });
    }
    Ok(bytes)
}

/// Refuses what is not a regular file of at most `max` bytes.
fn check(meta: &std::fs::Metadata, max: u64) -> Result<(), FileError> {
    let kind = meta.file_type();
    if kind.is_symlink() {
        return Err(FileError::Symlink);
    }
    if !kind.is_file() {
        return Err(FileError::NotRegular(describe(kind)));
    }
    if meta.len() > max {
        return Err(FileError::TooLarge {
            len: meta.len(),
            max,
        });
    }
    Ok(())
}

/// What a file that is not regular is, for errors.
fn describe(kind: std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if kind.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weir-file-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn regular_files_are_read_up_to_the_bound_and_nothing_else() {
        let dir = scratch("kinds");
        let file = dir.join("f");
        std::fs::write(&file, b"0123456789").unwrap();
        assert_eq!(
            read_regular(&file, 10, Links::Follow).unwrap(),
            b"0123456789"
        );
        let err = read_regular(&file, 9, Links::Follow).unwrap_err();
        assert!(
            matches!(err, FileError::TooLarge { len: 10, max: 9 }),
            "{err}"
        );
        let fifo = dir.join("pipe");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let err = read_regular(&fifo, 10, Links::Follow).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (a FIFO)");
        let err = read_regular(&dir, 10, Links::Follow).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (a directory)");
        assert!(read_regular(&dir.join("missing"), 10, Links::Follow)
            .unwrap_err()
            .is_not_found());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_link_is_followed_or_refused_as_asked() {
        let dir = scratch("links");
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let link = dir.join("l");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert_eq!(read_regular(&link, 10, Links::Follow).unwrap(), b"x");
        let err = read_regular(&link, 10, Links::Refuse).unwrap_err();
        assert!(matches!(err, FileError::Symlink), "{err}");
        let zero = dir.join("zero");
        std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
        let err = read_regular(&zero, 10, Links::Follow).unwrap_err();
        assert_eq!(err.to_string(), "not a regular file (a device)");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
