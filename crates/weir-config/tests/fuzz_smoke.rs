//! The rule-file fuzz target's stable smoke run (the full target is `fuzz/fuzz_targets/
//! rules_yaml.rs`, run with `cargo +nightly fuzz`; see TESTING.md): arbitrary text and
//! YAML-shaped documents through `RuleSet::parse`. It must answer a rule set or an error,
//! never panic or hang, and a rule set it accepts must match requests without error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use proptest::prelude::*;
use weir_config::{Descriptor, RuleSet};

/// A YAML-ish rule document: nested descriptors with random keys, values and blocks.
fn document() -> impl Strategy<Value = String> {
    let scalar = prop_oneof![
        "[a-z_]{0,12}",
        "[ -~]{0,40}",
        Just("*".to_string()),
        Just("\"quoted: {x}\"".to_string()),
        "[0-9]{1,25}",
        Just("&a [*a, *a]".to_string()),
    ];
    let block = prop_oneof![
        (scalar.clone(), "[0-9a-z.-]{0,12}")
            .prop_map(|(u, n)| format!("rate_limit: {{unit: {u}, requests_per_unit: {n}}}")),
        (scalar.clone(), "[0-9a-z.]{0,8}", "[0-9smhd.]{0,6}")
            .prop_map(|(a, l, w)| format!("rule: {{algorithm: {a}, limit: {l}, window: {w}}}")),
        Just("unlimited: true".to_string()),
        Just("shadow_mode: true".to_string()),
        Just("quota_mode: true".to_string()),
    ];
    let node = (
        scalar.clone(),
        proptest::option::of(scalar),
        proptest::option::of(block),
    );
    (
        "[a-z]{0,8}",
        proptest::collection::vec((node, 0usize..4), 0..8),
    )
        .prop_map(|(domain, nodes)| {
            let mut out = format!("domain: {domain}\ndescriptors:\n");
            for ((key, value, block), depth) in nodes {
                let pad = "  ".repeat(depth * 2 + 1);
                out.push_str(&format!("{pad}- key: {key}\n"));
                if let Some(v) = value {
                    out.push_str(&format!("{pad}  value: {v}\n"));
                }
                if let Some(b) = block {
                    out.push_str(&format!("{pad}  {b}\n"));
                }
                out.push_str(&format!("{pad}  descriptors:\n"));
            }
            out
        })
}

fn exercise(text: &str) {
    if let Ok(rules) = RuleSet::parse("fuzz.yaml", text) {
        for domain in rules.domains().map(str::to_owned).collect::<Vec<_>>() {
            let request = [
                Descriptor::new([("k", "v")]),
                Descriptor::new([("a", "b"), ("c", "d")]),
            ];
            rules.matches(&domain, &request).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,300}") {
        exercise(&text);
    }

    #[test]
    fn rule_shaped_documents_never_panic(text in document()) {
        exercise(&text);
    }
}
