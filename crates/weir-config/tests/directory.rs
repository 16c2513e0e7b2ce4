//! Loading a directory as ratelimit does: every `*.yaml` / `*.yml` file, one domain each,
//! hidden files, other extensions and subdirectories skipped; a domain in two files is an
//! error naming both; `merge` follows the same rule.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::PathBuf;

use weir_config::{ConfigError, RuleSet};

fn dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/dirs")
        .join(name)
}

#[test]
fn a_directory_loads_every_rule_file_and_nothing_else() {
    let rules = RuleSet::load(&dir("mixed")).unwrap();
    assert_eq!(rules.domains().collect::<Vec<_>>(), ["one", "two"]);
    assert_eq!(rules.rules().len(), 2);
    assert_eq!(
        rules.domain_file("two"),
        Some(dir("mixed").join("two.yml").as_path())
    );
    assert_eq!(rules.rules()[1].file, dir("mixed").join("two.yml"));
}

#[test]
fn a_domain_in_two_files_is_an_error_naming_both() {
    let err = RuleSet::load(&dir("duplicate")).unwrap_err();
    assert!(matches!(err, ConfigError::DuplicateDomain { .. }));
    assert_eq!(
        err.to_string(),
        format!(
            "{}: domain 'shared' is already defined in {}",
            dir("duplicate").join("b.yml").display(),
            dir("duplicate").join("a.yaml").display()
        )
    );
}

#[test]
fn a_directory_without_rule_files_is_an_error() {
    let err = RuleSet::load(&dir("empty")).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}: no *.yaml or *.yml rule files", dir("empty").display())
    );
}

#[test]
fn a_missing_path_is_an_io_error_naming_it() {
    let missing = dir("does-not-exist");
    let err = RuleSet::load(&missing).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }));
    assert!(err
        .to_string()
        .starts_with(&format!("{}: cannot read: ", missing.display())));
}

#[test]
fn merging_keeps_rules_in_domain_order_and_refuses_duplicates() {
    let b = RuleSet::parse("b.yaml", "domain: b\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 2}\n").unwrap();
    let a = RuleSet::parse("a.yaml", "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n").unwrap();
    let merged = b.clone().merge(a).unwrap();
    let ids: Vec<&str> = merged.rules().iter().map(|r| r.id.as_ref()).collect();
    assert_eq!(ids, ["a.k", "b.k"]);
    // Matching still finds each domain's own rules after the merge.
    let m = merged
        .matches("b", &[weir_config::Descriptor::new([("k", "v")])])
        .unwrap();
    assert_eq!(m[0].as_ref().unwrap().rule().unwrap().limit(), 2);
    assert!(matches!(
        merged.merge(b),
        Err(ConfigError::DuplicateDomain { .. })
    ));
}

/// Issue 10: a dangling or looping symlink rule file was skipped silently (the domain
/// vanished on reload, and its lockouts with it); a FIFO named `*.yaml` hung the reload;
/// `/dev/zero` was read without bound. Each is now an error naming the file.
mod not_regular_files {
    use std::path::Path;
    use std::process::Command;
    use std::sync::mpsc;
    use std::time::Duration;

    use super::*;

    /// A scratch rule directory holding `a.yaml`, removed when the test ends (pass or fail).
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("weir-config-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.yaml"), "domain: a\ndescriptors: []\n").unwrap();
        Scratch(dir)
    }

    /// Loads on a thread, so that a hang fails the test instead of stalling it.
    fn load_bounded(dir: &Path) -> Result<RuleSet, ConfigError> {
        let (tx, rx) = mpsc::channel();
        let dir = dir.to_path_buf();
        std::thread::spawn(move || {
            let _ = tx.send(RuleSet::load(&dir));
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("loading the rule directory hung")
    }

    fn assert_names(err: &ConfigError, file: &Path) {
        assert_eq!(err.file(), file, "{err}");
        assert!(
            err.to_string().contains(&file.display().to_string()),
            "{err}"
        );
    }

    #[test]
    fn a_dangling_symlink_is_an_error() {
        let dir = scratch("dangling");
        let link = dir.join("b.yaml");
        std::os::unix::fs::symlink(dir.join("missing.yaml"), &link).unwrap();
        assert_names(&load_bounded(&dir).unwrap_err(), &link);
    }

    #[test]
    fn a_looping_symlink_is_an_error() {
        let dir = scratch("loop");
        let link = dir.join("b.yaml");
        std::os::unix::fs::symlink(&link, &link).unwrap();
        assert_names(&load_bounded(&dir).unwrap_err(), &link);
    }

    #[test]
    fn a_symlink_to_a_regular_file_is_followed() {
        let dir = scratch("link-ok");
        let target = dir.join("real.txt");
        std::fs::write(&target, "domain: b\ndescriptors: []\n").unwrap();
        std::os::unix::fs::symlink(&target, dir.join("b.yaml")).unwrap();
        let rules = load_bounded(&dir).unwrap();
        assert_eq!(rules.domains().collect::<Vec<_>>(), ["a", "b"]);
    }

    #[test]
    fn a_fifo_is_an_error_not_a_hang() {
        let dir = scratch("fifo");
        let fifo = dir.join("b.yaml");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let err = load_bounded(&dir).unwrap_err();
        assert_names(&err, &fifo);
        assert!(err.to_string().contains("FIFO"), "{err}");
        // Loading the FIFO itself, not through a directory, must not hang either.
        let err = load_bounded(&fifo).unwrap_err();
        assert_names(&err, &fifo);
    }

    #[test]
    fn a_device_is_an_error_not_an_endless_read() {
        let dir = scratch("zero");
        let link = dir.join("b.yaml");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let err = load_bounded(&dir).unwrap_err();
        assert_names(&err, &link);
        assert!(err.to_string().contains("device"), "{err}");
    }
}
