//! Redis key names: where a [`Key`]'s record lives. One string per key (its layout is in
//! the crate docs, "Key layout"), named so that the name is hash-tagged (`{…}`) and every
//! key of one decision can share a Cluster slot:
//!
//! - a key without a hash tag of its own becomes `<prefix>:{<key>}`;
//! - a key with one (`{…}`, non-empty, as Redis finds it) becomes `<prefix>::<key>`, so its
//!   own tag decides the slot: `api:1s:{user-7}` and `api:1h:{user-7}` share one.
//!
//! The two shapes differ at the byte after `<prefix>:`, so no two keys share a name.

use redis::cluster_routing::Slot;
use weir_core::Key;

/// The hash tag Redis would find in `bytes`: between the first `{` and the next `}`,
/// if non-empty.
fn hash_tag(bytes: &[u8]) -> Option<&[u8]> {
    let open = bytes.iter().position(|&b| b == b'{')?;
    let rest = bytes.get(open + 1..)?;
    let close = rest.iter().position(|&b| b == b'}')?;
    let tag = rest.get(..close)?;
    (!tag.is_empty()).then_some(tag)
}

/// The Redis key of `key`'s record.
pub(crate) fn record_key(prefix: &str, key: &Key) -> Vec<u8> {
    let bytes = key.as_bytes();
    let mut name = Vec::with_capacity(prefix.len() + bytes.len() + 3);
    name.extend_from_slice(prefix.as_bytes());
    if hash_tag(bytes).is_some() {
        name.extend_from_slice(b"::");
        name.extend_from_slice(bytes);
    } else {
        name.extend_from_slice(b":{");
        name.extend_from_slice(bytes);
        name.push(b'}');
    }
    name
}

/// The Cluster slot of a Redis key.
pub(crate) fn slot(name: &[u8]) -> Slot {
    Slot::for_key(name)
}

/// The Cluster slot of a Redis key as a number (0..16384), as [`slot`] finds it: CRC16
/// (XMODEM) of its hash tag, or of the whole key without one, modulo 16384. redis-rs keeps
/// the number of its `Slot` private; the part table (`shards.rs`) needs it.
pub(crate) fn slot_number(name: &[u8]) -> u16 {
    let hashed = hash_tag(name).unwrap_or(name);
    let mut crc: u16 = 0;
    for byte in hashed {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16_384
}

/// Whether a prefix keeps the naming scheme sound (no braces, or tags would move).
pub(crate) fn prefix_is_valid(prefix: &str) -> bool {
    !prefix.contains(['{', '}'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(key: &str) -> String {
        String::from_utf8(record_key("weir", &Key::new(key).unwrap())).unwrap()
    }

    #[test]
    fn keys_are_tagged_by_themselves_or_by_their_own_tag() {
        assert_eq!(name("login:alice"), "weir:{login:alice}");
        assert_eq!(name("api:1s:{user-7}"), "weir::api:1s:{user-7}");
        assert_eq!(name("{}x"), "weir:{{}x}");
        assert_eq!(
            slot(name("api:1s:{user-7}").as_bytes()),
            slot(name("api:1h:{user-7}").as_bytes())
        );
        assert_eq!(slot(name("{user-7}").as_bytes()), slot(b"user-7"));
    }

    #[test]
    fn slot_numbers_agree_with_redis_rs() {
        for key in [
            "login:alice",
            "api:1s:{user-7}",
            "{}x",
            "",
            "a{}{b}",
            "weir:{x}",
        ] {
            let name = record_key("weir", &Key::new(key).unwrap_or(Key::new("k").unwrap()));
            assert_eq!(Slot::new(slot_number(&name)), Some(slot(&name)), "{key}");
            let raw = key.as_bytes();
            assert_eq!(Slot::new(slot_number(raw)), Some(slot(raw)), "{key}");
        }
        // Redis's own example: slot of "123456789" is 0x31C3 % 16384.
        assert_eq!(slot_number(b"123456789"), 0x31C3);
    }

    #[test]
    fn a_tagged_and_an_untagged_key_never_share_a_name() {
        // `{x}` has a tag; `x` wrapped would read `weir:{x}` if tagged keys were not
        // marked by the second colon.
        assert_ne!(name("{x}"), name("x"));
    }
}
