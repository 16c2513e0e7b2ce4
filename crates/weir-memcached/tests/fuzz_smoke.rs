//! The memcached reply parser's fuzz target, as a stable smoke run (the full target is
//! `fuzz/fuzz_targets/memcached_reply.rs`; see TESTING.md): arbitrary bytes and
//! reply-shaped lines, for each command kind. The parser must answer or fail, never panic
//! or loop, whatever a server (or anyone on the path) sends.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // tests state expectations by panicking

use proptest::prelude::*;
use weir_memcached::fuzzing::parse_replies;

fn reply_line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"STORED\r\n".to_vec()),
        Just(b"END\r\n".to_vec()),
        Just(b"NOT_FOUND\r\n".to_vec()),
        Just(b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n".to_vec()),
        "[0-9]{0,25}".prop_map(|n| format!("{n}\r\n").into_bytes()),
        (
            "[ -~]{0,20}",
            0u64..u64::MAX,
            "[0-9]{0,22}",
            "[0-9]{0,22}",
            proptest::collection::vec(any::<u8>(), 0..40)
        )
            .prop_map(|(k, f, len, cas, data)| {
                let mut v = format!("VALUE {k} {f} {len} {cas}\r\n").into_bytes();
                v.extend(data);
                v.extend(b"\r\n");
                v
            }),
        proptest::collection::vec(any::<u8>(), 0..64),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(kind in any::<u8>(), bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        parse_replies(kind, &bytes);
    }

    #[test]
    fn reply_shaped_streams_never_panic(kind in any::<u8>(), lines in proptest::collection::vec(reply_line(), 0..8)) {
        let bytes: Vec<u8> = lines.concat();
        let parsed = parse_replies(kind, &bytes);
        prop_assert!(parsed <= bytes.len());
    }
}

#[test]
fn a_well_formed_stream_parses_whole() {
    assert_eq!(parse_replies(1, b"STORED\r\nNOT_STORED\r\nEXISTS\r\n"), 3);
    assert_eq!(parse_replies(3, b"42\r\nNOT_FOUND\r\nx\r\n"), 2);
}
