//! The proxy's path descriptor: bounded, and matching it never fails.
#![no_main]
use libfuzzer_sys::fuzz_target;
use weir_config::{bounded_value, Descriptor, RuleSet};

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else { return };
    let value = bounded_value(&weir_proxy::normalise_path(path)).into_owned();
    assert!(value.len() <= weir_config::bounds::MAX_VALUE_LEN);
    let rules = RuleSet::parse(
        "proxy.yaml",
        "domain: proxy\ndescriptors:\n  - key: path\n    rule: {algorithm: fixed_window, limit: 1, window: 1h}\n",
    )
    .unwrap();
    rules
        .matches("proxy", &[Descriptor::new([("path", value.as_str())])])
        .unwrap();
});
