//! `weir_server::fuzzing::json_body`: request bytes → a request or a 400, then matching.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = weir_server::fuzzing::json_body(data) {
        let rules = weir_config::RuleSet::parse(
            "fuzz.yaml",
            "domain: rl\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n",
        )
        .unwrap();
        let _ = weir_server::fuzzing::match_request(&rules, &request);
    }
});
