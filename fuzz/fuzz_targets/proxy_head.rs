//! The proxy's request-head handling: refusals, path descriptor, client IP.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(head) = weir_proxy::fuzzing::request_head(data) {
        match &head.path {
            Some(path) => {
                assert!(path.len() <= weir_config::bounds::MAX_VALUE_LEN);
                assert!(path.starts_with('/'));
            }
            None => assert!(head.refused),
        }
    }
});
