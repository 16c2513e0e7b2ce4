//! The memcached reply parser over arbitrary bytes, for each command kind.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((kind, bytes)) = data.split_first() {
        weir_memcached::fuzzing::parse_replies(*kind, bytes);
    }
});
