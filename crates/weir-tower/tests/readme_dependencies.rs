//! The READMEs' Rust snippets need only the dependencies their READMEs list. The snippets
//! are compiled as doctests (`src/lib.rs` includes the repository's README and this crate's;
//! weir-core includes its own), but a doctest compiles with every dev-dependency of its
//! crate, so a snippet using a crate the README never lists (`http`, say) would pass there
//! and fail for a newcomer who pastes it. This reads each README's ```toml
//! `[dependencies]` blocks and checks every crate a snippet names, and the features the
//! snippets visibly lean on (tokio's runtime, macros and `net`, tower's `util` for
//! `oneshot`), against them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Crate roots that need no dependency.
const BUILT_IN: &[&str] = &["std", "core", "alloc", "crate", "self", "super"];

/// The fenced blocks of `markdown` whose info string starts with `lang`.
fn blocks(markdown: &str, lang: &str) -> Vec<String> {
    let mut out = Vec::new();
    // Inside a fence: `Some(true)` one of `lang`'s, `Some(false)` another's.
    let mut inside: Option<bool> = None;
    let mut block = String::new();
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        match (inside, trimmed.strip_prefix("```")) {
            (None, Some(info)) => inside = Some(info.split(',').next() == Some(lang)),
            (Some(ours), Some(_)) => {
                if ours {
                    out.push(std::mem::take(&mut block));
                }
                inside = None;
            }
            (Some(true), None) => {
                block.push_str(line);
                block.push('\n');
            }
            _ => {}
        }
    }
    out
}

/// Each listed dependency (hyphens as underscores) and the features its line names.
fn dependencies(markdown: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut deps = BTreeMap::new();
    for block in blocks(markdown, "toml") {
        let mut in_deps = false;
        for line in block.lines() {
            let line = line.trim();
            if line.starts_with('[') {
                in_deps = line == "[dependencies]";
                continue;
            }
            let Some((name, value)) = line.split_once('=') else {
                continue;
            };
            if !in_deps || name.trim().starts_with('#') {
                continue;
            }
            let features = value
                .split_once("features")
                .map(|(_, list)| {
                    list.split('"')
                        .skip(1)
                        .step_by(2)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            deps.insert(name.trim().replace('-', "_"), features);
        }
    }
    deps
}

/// The first segment of every lower-case path in `code` (`axum` in `axum::serve`), but not
/// of a path inside a `use` group or after a method's dot.
fn crate_roots(code: &str) -> BTreeSet<String> {
    let mut roots = BTreeSet::new();
    let bytes = code.as_bytes();
    let mut i = 0;
    while let Some(at) = code[i..].find("::") {
        let end = i + at;
        let start = code[..end]
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(0, |p| p + 1);
        let word = &code[start..end];
        let after_colons = start >= 2 && &bytes[start - 2..start] == b"::";
        // inside a `use` group (`{routing::get, …}`), a method (`.into_…::<T>`), a turbofish
        let nested = matches!(
            code[..start].trim_end().chars().last(),
            Some('{' | ',' | '.')
        );
        let turbofish = code[end + 2..].starts_with('<');
        if !after_colons
            && !nested
            && !turbofish
            && word.starts_with(|c: char| c.is_ascii_lowercase())
        {
            roots.insert(word.to_string());
        }
        i = end + 2;
    }
    roots
}

/// What `readme`'s snippets need that its dependency list does not give.
fn missing(readme: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(readme).unwrap();
    let deps = dependencies(&text);
    let mut missing = Vec::new();
    let mut need = |krate: &str, feature: Option<&str>, why: &str| match deps.get(krate) {
        None => missing.push(format!("crate `{krate}` ({why})")),
        Some(features) => {
            if let Some(f) = feature.filter(|f| !features.contains(*f)) {
                missing.push(format!("`{krate}` feature `{f}` ({why})"));
            }
        }
    };
    for code in blocks(&text, "rust") {
        for root in crate_roots(&code) {
            if !BUILT_IN.contains(&root.as_str()) {
                need(&root, None, "named by a snippet");
            }
        }
        if code.contains("#[tokio::main]") {
            need("tokio", Some("macros"), "#[tokio::main]");
            need(
                "tokio",
                Some("rt-multi-thread"),
                "#[tokio::main]'s default runtime",
            );
        }
        if code.contains("#[tokio::main(flavor = \"current_thread\")]") {
            need("tokio", Some("macros"), "#[tokio::main]");
            need("tokio", Some("rt"), "a current-thread runtime");
        }
        if code.contains("tokio::net") {
            need("tokio", Some("net"), "tokio::net");
        }
        if code.contains(".oneshot(") {
            need("tower", Some("util"), "ServiceExt::oneshot");
        }
    }
    missing
}

fn repository() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .unwrap()
}

#[test]
fn the_readmes_list_every_dependency_their_snippets_use() {
    for readme in [
        "README.md",
        "crates/weir-tower/README.md",
        "crates/weir-core/README.md",
    ] {
        let path = repository().join(readme);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            !blocks(&text, "rust").is_empty(),
            "{readme}: no Rust snippet found (did the fences change?)"
        );
        assert!(
            missing(&path).is_empty(),
            "{readme}: its snippets need what it does not list: {:?}",
            missing(&path)
        );
    }
}

/// The check itself: a snippet using `http` under a list without it is caught, and so is
/// `oneshot` without tower's `util`.
#[test]
fn a_snippet_using_an_unlisted_crate_or_feature_is_caught() {
    let dir = std::env::temp_dir().join(format!("weir-readme-check-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let readme = dir.join("README.md");
    std::fs::write(
        &readme,
        "```toml\n[dependencies]\nweir-tower = \"0.1\"\ntower = \"0.5\"\n```\n\n\
         ```rust\nuse http::Request;\nuse weir_tower::KeyBy;\nlet r = app.oneshot(x);\n```\n",
    )
    .unwrap();
    let found = missing(&readme);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        [
            "crate `http` (named by a snippet)".to_string(),
            "`tower` feature `util` (ServiceExt::oneshot)".to_string(),
        ]
    );
}
