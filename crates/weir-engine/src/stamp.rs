//! The fingerprint of the rule files ([`stamp`]): what the reload watch and poll compare
//! (`reload.rs`), and what `RuleBook::reload` records of what it read (`rules.rs`). A leaf:
//! it reads the file system and nothing of the crate. Files are read as the loader reads
//! them (`weir_config::file::read_regular`): a FIFO, a device or an oversized file named
//! like a rule file stamps as its error, never hangs a poll and never costs more than the
//! loader's bound.

use std::hash::{BuildHasher, Hasher};
use std::path::{Path, PathBuf};

use weir_config::bounds::MAX_FILE_BYTES;
use weir_config::file::{read_regular, Links};

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

pub(crate) fn stamp_files(files: Vec<PathBuf>) -> u64 {
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
        // Through the loader's own safe reader: a FIFO or a device is never opened for
        // reading nor waited on, a file over the loader's bound is refused by its size
        // unread, and what is hashed is at most that bound (the size and mtime alone could
        // miss a same-size rewrite within the file system's time granularity).
        match read_regular(&file, MAX_FILE_BYTES, Links::Follow) {
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
