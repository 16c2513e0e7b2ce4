//! envoyproxy/ratelimit's runtime directory as a rule source ([`RuleSource::Runtime`]):
//! **every file** under it is a rule file, whatever its name, in subdirectories too, as
//! ratelimit's runtime loader (lyft/goruntime) reads `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
//! RUNTIME_APPDIRECTORY`. Hidden entries (`.name`) are read too unless ratelimit's
//! `RUNTIME_IGNOREDOTFILES` is set (Kubernetes ConfigMap mounts hold a `..data` copy:
//! ratelimit's deployments set it there). As goruntime's walk, a symbolic link to a
//! directory is not entered; a link to a file is read.
//!
//! Each file is loaded by `weir_config::RuleSet::load`, with its hardening: a FIFO, a
//! device, a socket or a dangling link is an error naming it (never skipped, never waited
//! on), as is a file above the size limit. A domain defined in two files is an error, as
//! in ratelimit without `MERGE_DOMAIN_CONFIG`, and merged with it. A directory that is
//! empty or missing holds no domain, as in ratelimit: the server starts (with a WARN,
//! `rules.rs`), answers every domain as unknown, and loads files as they appear. [`files`]
//! is the one listing: `weir serve`, its reload stamp and `weir check-config` all use it.
//! Not here: which rule source a server uses (`rules.rs`), when it is read again
//! (`reload.rs`, whose stamp lists the same files).
//!
//! [`RuleSource::Runtime`]: crate::RuleSource::Runtime

use std::path::{Path, PathBuf};

use weir_config::{ConfigError, RuleSet};

/// The most files read from one runtime directory (weir-config's limit for a directory).
const MAX_FILES: usize = weir_config::bounds::MAX_FILES;
/// The deepest subdirectory entered.
const MAX_DEPTH: usize = 16;

/// The rule files under `dir`, sorted: every entry that is not a directory (FIFOs and
/// the like included, so that loading them fails loudly), hidden ones only without
/// `ignore_dotfiles`. A missing `dir` holds none (ratelimit starts without it).
pub(crate) fn files(dir: &Path, ignore_dotfiles: bool) -> Result<Vec<PathBuf>, ConfigError> {
    let mut out = Vec::new();
    if std::fs::symlink_metadata(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound) {
        return Ok(out);
    }
    walk(dir, ignore_dotfiles, 0, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(
    dir: &Path,
    ignore_dotfiles: bool,
    depth: usize,
    out: &mut Vec<PathBuf>,
) -> Result<(), ConfigError> {
    let io = |source| ConfigError::Io {
        file: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        let hidden = entry.file_name().as_encoded_bytes().first() == Some(&b'.');
        if hidden && ignore_dotfiles {
            continue;
        }
        let kind = entry.file_type().map_err(io)?;
        if kind.is_dir() {
            if depth >= MAX_DEPTH {
                return Err(rejected(
                    &path,
                    format!("more than {MAX_DEPTH} levels of subdirectories"),
                ));
            }
            walk(&path, ignore_dotfiles, depth + 1, out)?;
            continue;
        }
        // A link to a directory is not entered (goruntime's walk does not follow it).
        if kind.is_symlink() && std::fs::metadata(&path).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        out.push(path);
        if out.len() > MAX_FILES {
            return Err(rejected(dir, format!("more than {MAX_FILES} rule files")));
        }
    }
    Ok(())
}

fn rejected(origin: &Path, reason: String) -> ConfigError {
    ConfigError::Rejected {
        origin: origin.to_path_buf(),
        reason,
    }
}

/// Loads every rule file under `dir` (see the module header); a domain in two files is
/// merged with `merge_domains` (`MERGE_DOMAIN_CONFIG`), an error without. An empty or
/// missing directory is an empty rule set, as in ratelimit.
pub(crate) fn load(
    dir: &Path,
    ignore_dotfiles: bool,
    merge_domains: bool,
) -> Result<RuleSet, ConfigError> {
    let mut set = RuleSet::default();
    for file in files(dir, ignore_dotfiles)? {
        let loaded = RuleSet::load(&file)?;
        set = if merge_domains {
            set.merge_domains(loaded)?
        } else {
            set.merge(loaded)?
        };
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOMAIN: &str = "domain: DOMAIN\ndescriptors:\n  - key: k\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n";

    fn write(path: &Path, domain: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, DOMAIN.replace("DOMAIN", domain)).unwrap();
    }

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weir-runtime-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn every_file_is_read_whatever_its_name_and_in_subdirectories() {
        let dir = temp("names");
        write(&dir.join("config.yaml"), "a");
        write(&dir.join("ratelimit.conf"), "b");
        write(&dir.join("no_extension"), "c");
        write(&dir.join("team/x.yml"), "d");
        write(&dir.join(".hidden"), "e");
        let set = load(&dir, false, false).unwrap();
        let domains: Vec<_> = set.domains().map(str::to_string).collect();
        assert_eq!(domains, ["a", "b", "c", "d", "e"]);
        let set = load(&dir, true, false).unwrap();
        assert_eq!(set.domains().count(), 4);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_domain_in_two_files_and_a_bad_file_are_errors_an_empty_directory_is_not() {
        let dir = temp("errors");
        assert!(load(&dir, false, false).unwrap().is_empty());
        assert!(load(&dir.join("missing"), false, false).unwrap().is_empty());
        write(&dir.join("one"), "a");
        write(&dir.join("two"), "a");
        let err = load(&dir, false, false).unwrap_err().to_string();
        assert!(err.contains("domain 'a' is already defined in"), "{err}");
        // MERGE_DOMAIN_CONFIG: the two files define the same key: still an error, named.
        let err = load(&dir, false, true).unwrap_err().to_string();
        assert!(
            err.contains("duplicate descriptor composite key 'a.k'"),
            "{err}"
        );
        std::fs::remove_file(dir.join("two")).unwrap();
        std::fs::write(dir.join("README"), "not: [a rule").unwrap();
        let err = load(&dir, false, false).unwrap_err().to_string();
        assert!(err.contains("README"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_is_refused_and_a_link_to_a_directory_is_not_entered() {
        let dir = temp("fifo");
        write(&dir.join("rules"), "a");
        let elsewhere = temp("fifo-elsewhere");
        write(&elsewhere.join("other"), "b");
        std::os::unix::fs::symlink(&elsewhere, dir.join("linked")).unwrap();
        assert_eq!(load(&dir, false, false).unwrap().domains().count(), 1);
        let fifo = dir.join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let err = load(&dir, false, false).unwrap_err().to_string();
        assert!(err.contains("pipe") && err.contains("a FIFO"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&elsewhere).unwrap();
    }
}
