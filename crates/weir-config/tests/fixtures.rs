//! Every fixture: `valid/*.yaml` must load; each `invalid/*.yaml` must fail with exactly the
//! message on its first line (`# expect: …`, the file named by its file name). One file per
//! error, so a changed message is a visible diff.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::fs;
use std::path::{Path, PathBuf};

use weir_config::RuleSet;

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(dir);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no fixtures in {}", dir.display());
    files
}

#[test]
fn every_valid_fixture_loads() {
    for file in fixtures("valid") {
        let rules = RuleSet::load(&file).unwrap_or_else(|e| panic!("{e}"));
        assert!(!rules.is_empty(), "{}", file.display());
    }
}

#[test]
fn every_invalid_fixture_fails_with_its_message() {
    let mut failures = Vec::new();
    for file in fixtures("invalid") {
        let text = fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_str().unwrap();
        let expected = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{name}: first line must be `# expect: <message>`"));
        match RuleSet::parse(name, &text) {
            Ok(_) => failures.push(format!("{name}: loaded, expected `{expected}`")),
            Err(e) if e.to_string() != expected => failures.push(format!(
                "{name}:\n  expected `{expected}`\n  got      `{e}`"
            )),
            Err(_) => {}
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n"));
}

#[test]
fn errors_from_a_loaded_file_name_its_path() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/invalid/bad_unit.yaml");
    let message = RuleSet::load(&file).unwrap_err().to_string();
    assert!(
        message.starts_with(&format!(
            "{}:6: descriptors[0].rate_limit.unit: ",
            file.display()
        )),
        "{message}"
    );
}
