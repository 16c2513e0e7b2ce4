//! The proxy's path descriptor: bounded, and matching it never fails, under either path
//! reading; a path the reading does not refuse is read to its own normal form.
#![no_main]
use libfuzzer_sys::fuzz_target;
use weir_config::{bounded_value, Descriptor, RuleSet};
use weir_proxy::PathMatch;

fuzz_target!(|data: &[u8]| {
    let Ok(path) = std::str::from_utf8(data) else { return };
    let rules = RuleSet::parse(
        "proxy.yaml",
        "domain: proxy\ndescriptors:\n  - key: path\n    rule: {algorithm: fixed_window, limit: 1, window: 1h}\n",
    )
    .unwrap();
    let check = |value: &str| {
        let value = bounded_value(value).into_owned();
        assert!(value.len() <= weir_config::bounds::MAX_VALUE_LEN);
        rules
            .matches("proxy", &[Descriptor::new([("path", value.as_str())])])
            .unwrap();
    };
    check(&weir_proxy::normalise_path(path));
    for mode in [PathMatch::Normalized, PathMatch::Exact] {
        if let Ok(normal) = mode.normalise(path) {
            assert_eq!(mode.normalise(&normal).unwrap(), normal);
            check(&normal);
        }
    }
});
