//! The request fuzz targets' stable smoke run (the full targets are in `fuzz/`, run with
//! `cargo +nightly fuzz`; see TESTING.md): `/v1/check` and `/json` bodies and raw RLS
//! messages, arbitrary and request-shaped, parsed and matched against the Envoy README
//! rules as the server does. Each must give a request or an error (a 400), never a panic,
//! and a request that parses must match without error or be refused: never "unlimited" by
//! accident.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use std::path::Path;
use std::sync::OnceLock;

use proptest::prelude::*;
use weir_config::RuleSet;
use weir_server::fuzzing::{check_body, json_body, match_request, rls_request};

fn rules() -> &'static RuleSet {
    static RULES: OnceLock<RuleSet> = OnceLock::new();
    RULES.get_or_init(|| {
        RuleSet::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envoy-readme"))
            .unwrap()
    })
}

fn exercise(bytes: &[u8]) {
    let parsed = [check_body(bytes), json_body(bytes), rls_request(bytes)];
    // Matching answers or refuses; both are fine, a panic is not.
    for request in parsed.iter().flatten() {
        let _ = match_request(rules(), request);
    }
}

fn entry() -> impl Strategy<Value = String> {
    let text = prop_oneof!["[a-z_]{0,10}", "\\PC{0,30}", "[a-z]{1200,1300}"];
    (text.clone(), text).prop_map(|(k, v)| {
        format!(
            r#"{{"key": {}, "value": {}}}"#,
            serde_json::json!(k),
            serde_json::json!(v)
        )
    })
}

fn body() -> impl Strategy<Value = String> {
    let descriptor = (
        proptest::collection::vec(entry(), 0..4),
        proptest::option::of((0u64..u64::MAX, "[a-zA-Z_]{0,8}")),
        proptest::option::of(prop_oneof![
            Just("1".to_string()),
            Just("-1".to_string()),
            Just("\"7\"".to_string()),
            Just("1e30".to_string())
        ]),
    )
        .prop_map(|(entries, limit, hits)| {
            let mut d = format!(r#"{{"entries": [{}]"#, entries.join(","));
            if let Some((n, unit)) = limit {
                d.push_str(&format!(
                    r#", "limit": {{"requests_per_unit": {n}, "unit": "{unit}"}}"#
                ));
            }
            if let Some(h) = hits {
                d.push_str(&format!(r#", "hits_addend": {h}"#));
            }
            d.push('}');
            d
        });
    (
        prop_oneof![
            "[a-z_]{0,12}",
            Just("rl".to_string()),
            Just("messaging".to_string())
        ],
        proptest::collection::vec(descriptor, 0..5),
        proptest::option::of(0u64..u64::MAX),
    )
        .prop_map(|(domain, descriptors, hits)| {
            let mut b = format!(
                r#"{{"domain": {}, "descriptors": [{}]"#,
                serde_json::json!(domain),
                descriptors.join(",")
            );
            if let Some(h) = hits {
                b.push_str(&format!(r#", "hits_addend": {h}"#));
            }
            b.push('}');
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 800, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        exercise(&bytes);
    }

    #[test]
    fn request_shaped_bodies_never_panic(body in body()) {
        exercise(body.as_bytes());
    }
}
