//! Text → [`RawFile`] with serde-saphyr, under resource budgets (nesting, nodes, aliases,
//! scalar bytes) and refusing duplicate keys. A shape error (malformed YAML, an unknown
//! field, a duplicate key, a wrong type) becomes [`ConfigError::Yaml`] with the file, the
//! line, the path (tracked by serde_path_to_error) and the reason. The first step of
//! loading; `compile.rs` is the second.

use std::path::Path;

use serde::Deserialize;
use serde_path_to_error::Segment;

use crate::bounds::MAX_DEPTH;
use crate::error::ConfigError;
use crate::raw::RawFile;

/// The parser thread's stack. serde's recursive descent over `Spanned` nodes takes up to
/// ~200 KiB per descriptor level in debug builds, more than a 2 MiB worker thread holds at
/// [`MAX_DEPTH`] levels; loading is rare, so it gets a thread with room to spare (reserved,
/// not committed, memory).
const PARSER_STACK_BYTES: usize = 64 * 1024 * 1024;

/// Parses one rule document, on a thread of its own (see [`PARSER_STACK_BYTES`]).
pub(crate) fn parse(file: &Path, text: &str) -> Result<RawFile, ConfigError> {
    let failed = |reason: &str| ConfigError::Yaml {
        file: file.to_path_buf(),
        line: None,
        path: String::new(),
        reason: reason.to_string(),
    };
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("weir-config-parse".into())
            .stack_size(PARSER_STACK_BYTES)
            .spawn_scoped(scope, || parse_here(file, text))
            .map_err(|_| failed("cannot start the parser thread"))?
            .join()
            .map_err(|_| failed("the YAML parser failed"))?
    })
}

fn parse_here(file: &Path, text: &str) -> Result<RawFile, ConfigError> {
    // Rule files are small and rarely use anchors: tight budgets reject a hostile file in
    // milliseconds (an alias bomb stops at 10 000 replayed events).
    let mut alias_limits = serde_saphyr::options::AliasLimits::default();
    alias_limits.max_total_replayed_events = 10_000;
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            // A descriptor level is two YAML levels (a list and a map); a rule block adds four.
            max_depth: 2 * MAX_DEPTH + 4,
            max_nodes: 1_000_000,
            max_aliases: 1_000,
            max_anchors: 1_000,
            max_documents: 1,
            max_total_scalar_bytes: 16 * 1024 * 1024,
        },
        alias_limits: alias_limits,
        duplicate_keys: serde_saphyr::DuplicateKeyPolicy::Error,
        with_snippet: false,
    };
    let mut track = serde_path_to_error::Track::new();
    let parsed = serde_saphyr::with_deserializer_from_str_with_options(text, options, |de| {
        RawFile::deserialize(serde_path_to_error::Deserializer::new(de, &mut track))
    });
    parsed.map_err(|e| {
        let line = e
            .location()
            .map(|l| l.line())
            .filter(|l| *l > 0)
            .and_then(|l| u32::try_from(l).ok());
        let reason = reason(&e.to_string());
        // A budget breach is about the whole document, not where the parser happened to be.
        let whole_document = ["exceeds the YAML", "holds more"];
        let path = if whole_document.iter().any(|p| reason.starts_with(p)) {
            String::new()
        } else {
            document_path(&track.path())
        };
        ConfigError::Yaml {
            file: file.to_path_buf(),
            line,
            path,
            reason,
        }
    })
}

/// The path as the file's author sees it: `Spanned` adds a `value` level under every field
/// and list element it wraps, which is dropped here. Every field of `raw.rs` is spanned except
/// the `descriptors` and `replaces` lists, whose elements are.
fn document_path(path: &serde_path_to_error::Path) -> String {
    let mut out = String::new();
    let mut wrapper_next = false;
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => {
                out.push_str(&format!("[{index}]"));
                wrapper_next = true;
            }
            Segment::Map { key } if wrapper_next && key == "value" => wrapper_next = false,
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
                wrapper_next = key != "descriptors" && key != "replaces";
            }
            Segment::Unknown => wrapper_next = false,
        }
    }
    out
}

/// The library's message without its position (reported separately) and its hints meant for
/// programmers.
fn reason(message: &str) -> String {
    let message = match message.find(" at line ") {
        Some(at) => &message[..at],
        None => message,
    };
    if let Some(rest) = message.strip_prefix("duplicate mapping key: ") {
        let key = rest.split(',').next().unwrap_or(rest);
        return format!("duplicate key '{key}'");
    }
    if let Some(breach) = message.strip_prefix("budget breached: ") {
        if breach.starts_with("Documents") {
            return "holds more than one YAML document; put each domain in its own file".into();
        }
        return format!("exceeds the YAML resource budget ({breach})");
    }
    if let Some(detail) = message.strip_prefix("alias replay limit exceeded: ") {
        return format!("exceeds the YAML resource budget (aliases expand to too much: {detail})");
    }
    match message {
        "invalid i64" => "expected a whole number".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(text: &str) -> String {
        parse(Path::new("f.yaml"), text).unwrap_err().to_string()
    }

    #[test]
    fn shape_errors_name_the_line_and_the_path() {
        assert_eq!(
            error("domain: x\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: abc\n"),
            "f.yaml:6: descriptors[0].rate_limit.requests_per_unit: expected a whole number"
        );
        assert_eq!(
            error("domain: x\ndescriptors:\n  - key: a\n    value: b\n    bogus: 1\n"),
            "f.yaml:5: descriptors[0].bogus: unknown field `bogus`, expected one of key, value, rate_limit, rule, shadow_mode, quota_mode, detailed_metric, value_to_metric, share_threshold, metadata, descriptors"
        );
        assert_eq!(
            error("domain: x\ndomain: y\n"),
            "f.yaml:2: duplicate key 'domain'"
        );
    }
}
