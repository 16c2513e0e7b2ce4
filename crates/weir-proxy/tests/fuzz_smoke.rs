//! The proxy's request-head fuzz target, as a stable smoke run (the full target is
//! `fuzz/fuzz_targets/proxy_path.rs`; see TESTING.md): whatever path a client sends, the
//! proxy's path descriptor is bounded and matches without error, so no request is left
//! unlimited, and padding (`/./`, `//`, `%2e`) never makes two spellings of one path count
//! apart; under the default reading ([`PathMatch::Normalized`]) neither do case, a trailing
//! slash or `;params`, and a path is either refused or read, never left unlimited.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use proptest::prelude::*;
use weir_config::bounds::MAX_VALUE_LEN;
use weir_config::{bounded_value, Descriptor, RuleSet};
use weir_proxy::{normalise_path, PathMatch};

fn rules() -> &'static RuleSet {
    static RULES: std::sync::OnceLock<RuleSet> = std::sync::OnceLock::new();
    RULES.get_or_init(|| RuleSet::parse(
        "proxy.yaml",
        "domain: proxy\ndescriptors:\n  - key: class\n    value: reader\n    descriptors:\n      - key: path\n        rule: {algorithm: fixed_window, limit: 1, window: 1h}\n",
    )
    .unwrap())
}

fn segment() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{1,6}",
        Just(".".into()),
        Just("..".into()),
        Just("%2e".into()),
        Just("%2E%2e".into()),
        Just(String::new()),
        "\\PC{0,8}"
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_path_is_bounded_and_matches(path in "\\PC{0,3000}") {
        let value = bounded_value(&normalise_path(&path)).into_owned();
        prop_assert!(value.len() <= MAX_VALUE_LEN);
        prop_assert!(value.starts_with('/'));
        let d = Descriptor::new([("class", "reader"), ("path", value.as_str())]);
        let matched = rules().matches("proxy", &[d]).unwrap();
        prop_assert!(matched[0].is_some(), "limited");
        for mode in [PathMatch::Normalized, PathMatch::Exact] {
            if let Ok(normal) = mode.normalise(&path) {
                prop_assert_eq!(mode.normalise(&normal).unwrap(), normal.clone(), "idempotent");
                let value = bounded_value(&normal).into_owned();
                prop_assert!(value.len() <= MAX_VALUE_LEN);
                prop_assert!(value.starts_with('/'));
                let d = Descriptor::new([("class", "reader"), ("path", value.as_str())]);
                prop_assert!(rules().matches("proxy", &[d]).unwrap()[0].is_some(), "limited");
            }
        }
    }

    #[test]
    fn case_a_trailing_slash_and_params_never_make_a_new_path(
        segments in proptest::collection::vec(segment(), 0..12),
        upper in any::<bool>(),
        params in "[a-z0-9=]{1,6}",
    ) {
        let path = format!("/{}", segments.join("/"));
        let Ok(once) = PathMatch::Normalized.normalise(&path) else { return Ok(()) };
        let spelt = if upper { path.to_ascii_uppercase() } else { path.clone() };
        let last = spelt.rfind('/').unwrap_or(0);
        let with_params = match spelt.get(last + 1..) {
            Some(name) if !matches!(name, "" | "." | ".." | "%2e" | "%2E%2E") => {
                format!("{spelt};{params}/")
            }
            _ => format!("{spelt}/"),
        };
        if let Ok(again) = PathMatch::Normalized.normalise(&with_params) {
            prop_assert_eq!(again, once);
        }
    }

    #[test]
    fn padding_never_makes_a_new_path(segments in proptest::collection::vec(segment(), 0..12)) {
        let path = format!("/{}", segments.join("/"));
        let once = normalise_path(&path);
        prop_assert_eq!(normalise_path(&once), once.clone(), "normalising is idempotent");
        let padded = format!("/.{}", path.replace('/', "//./"));
        prop_assert_eq!(normalise_path(&padded), once);
    }
}

fn head_line() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("Host: a.example".to_string()),
        Just("Host: a.example\r\nHost: b.example".to_string()),
        Just("Host: u@h".to_string()),
        Just("Connection: Upgrade\r\nUpgrade: websocket".to_string()),
        Just("Upgrade: h2c".to_string()),
        "X-Forwarded-For: [0-9a-f:., ]{0,60}",
        "Forwarded: [ -~]{0,60}",
        "[A-Za-z-]{1,12}: [ -~]{0,40}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, failure_persistence: None, ..ProptestConfig::default() })]

    /// Arbitrary bytes as a request head: no panic.
    #[test]
    fn any_bytes_as_a_request_head(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = weir_proxy::fuzzing::request_head(&bytes);
    }

    /// Request-shaped heads: a head that parses is refused or gets a bounded path.
    #[test]
    fn request_shaped_heads(
        method in prop_oneof![
            Just("GET".to_string()),
            Just("CONNECT".to_string()),
            Just("POST".to_string()),
            "[A-Z]{1,8}",
        ],
        path in "/\\PC{0,200}",
        version in prop_oneof![Just("1.0".to_string()), Just("1.1".to_string())],
        lines in proptest::collection::vec(head_line(), 0..6),
    ) {
        let head = format!("{method} {path} HTTP/{version}\r\n{}\r\n\r\n", lines.join("\r\n"));
        if let Some(h) = weir_proxy::fuzzing::request_head(head.as_bytes()) {
            match &h.path {
                Some(path) => {
                    prop_assert!(path.len() <= MAX_VALUE_LEN);
                    prop_assert!(path.starts_with('/'));
                }
                None => prop_assert!(h.refused, "a path without a descriptor is refused"),
            }
            if method == "CONNECT" {
                prop_assert!(h.refused);
            }
            // Only an HTTP/1.1 upgrade that says so in `Connection` is tunnelled.
            if h.upgrade {
                prop_assert!(version == "1.1");
                prop_assert!(head.to_ascii_lowercase().contains("connection: upgrade"));
            }
        }
    }
}
