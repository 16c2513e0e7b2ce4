//! Rule files: any text through `RuleSet::parse`; an accepted rule set must match requests.
#![no_main]
use libfuzzer_sys::fuzz_target;
use weir_config::{Descriptor, RuleSet};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(rules) = RuleSet::parse("fuzz.yaml", text) {
        let domains: Vec<String> = rules.domains().map(str::to_owned).collect();
        for domain in domains {
            rules.matches(&domain, &[Descriptor::new([("k", "v")])]).unwrap();
        }
    }
});
