//! Key names: how a Weir key (1 to 512 arbitrary bytes) becomes memcached key names (at most
//! 250 bytes, no spaces or control characters). The first step of every decision in this
//! store; it decides nothing itself.
//!
//! A name is `{prefix}{kind}:{body}`:
//! - `kind` says what lives there: `r` the key's record (or, for the counters, its guard),
//!   `f{start}` a fixed-window counter, `s{start}` a sliding-window bucket (`start` in hex
//!   nanoseconds). A kind never contains `:`, so the first `:` after the prefix ends it.
//! - `body` is `=` followed by the key itself when every byte is printable ASCII (`!`..`~`)
//!   and the longest name fits in 250 bytes; otherwise `#` followed by the first 128 bits of
//!   the key's SHA-256, in hex.
//!
//! **Collisions.** Verbatim names are injective (prefix, kind and key are recovered from the
//! name) and never start their body with `#`, so they cannot meet a hashed name. Two hashed
//! keys share a name only if their SHA-256 prefixes collide: with 128 bits, a store holding
//! `n` long keys sees one with probability about `n² / 2¹²⁹` (below 10⁻¹⁸ for a billion
//! keys), and an attacker who chooses keys needs about 2⁶⁴ hashes to find a pair. Such a pair
//! would share one budget, which can only deny more, never admit more. SHA-256 is stable, so
//! every instance and every version names a key alike.

use sha2::{Digest, Sha256};
use weir_core::Key;

/// memcached's longest key.
const MAX_NAME_LEN: usize = 250;
/// The longest kind: `f` or `s` and 16 hex digits.
const MAX_KIND_LEN: usize = 17;
/// The longest prefix accepted.
pub(crate) const MAX_PREFIX_LEN: usize = 64;

/// Whether `byte` may appear in a memcached key as is.
fn is_safe(byte: u8) -> bool {
    (b'!'..=b'~').contains(&byte)
}

/// Whether `prefix` is usable in names.
pub(crate) fn is_valid_prefix(prefix: &str) -> bool {
    prefix.len() <= MAX_PREFIX_LEN && prefix.bytes().all(is_safe)
}

/// The names of one key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Names {
    prefix: String,
    body: String,
}

impl Names {
    /// The names of `key` under `prefix` (already validated).
    pub(crate) fn new(prefix: &str, key: &Key) -> Self {
        let bytes = key.as_bytes();
        let fits = prefix.len() + MAX_KIND_LEN + 2 + bytes.len() <= MAX_NAME_LEN;
        let body = match std::str::from_utf8(bytes) {
            Ok(text) if fits && bytes.iter().all(|b| is_safe(*b)) => format!("={text}"),
            _ => {
                let digest = Sha256::digest(bytes);
                let mut body = String::with_capacity(33);
                body.push('#');
                for byte in digest.iter().take(16) {
                    body.push_str(&format!("{byte:02x}"));
                }
                body
            }
        };
        Self {
            prefix: prefix.to_owned(),
            body,
        }
    }

    /// The part every name of the key shares: what places the key on a server (`ring.rs`).
    pub(crate) fn body(&self) -> &str {
        &self.body
    }

    /// Where the key's record lives (for the counters: its block and lockout strikes).
    pub(crate) fn record(&self) -> String {
        format!("{}r:{}", self.prefix, self.body)
    }

    /// A fixed-window counter for the window starting at `start_ns`.
    pub(crate) fn fixed(&self, start_ns: u64) -> String {
        format!("{}f{start_ns:x}:{}", self.prefix, self.body)
    }

    /// A sliding-window bucket starting at `start_ns`.
    pub(crate) fn sliding(&self, start_ns: u64) -> String {
        format!("{}s{start_ns:x}:{}", self.prefix, self.body)
    }
}

/// The body of `name`, one of the names (under `prefix`) that [`Names`] makes: what follows
/// the first `:` after the prefix (a kind never contains `:`). `None` for any other string.
pub(crate) fn body_of<'a>(prefix: &str, name: &'a str) -> Option<&'a str> {
    name.strip_prefix(prefix)?
        .split_once(':')
        .map(|(_, body)| body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        name.len() <= MAX_NAME_LEN && name.bytes().all(is_safe)
    }

    #[test]
    fn printable_short_keys_stay_readable() {
        let names = Names::new("weir:", &Key::new("login:alice").unwrap());
        assert_eq!(names.record(), "weir:r:=login:alice");
        assert_eq!(names.fixed(255), "weir:fff:=login:alice");
    }

    #[test]
    fn long_or_unsafe_keys_are_hashed_into_valid_names() {
        for key in [
            Key::new(vec![b'a'; 512]).unwrap(),
            Key::new("with space").unwrap(),
            Key::new("line\r\nbreak").unwrap(),
            Key::new([0xffu8, 0, 7]).unwrap(),
            Key::new("é").unwrap(),
        ] {
            let names = Names::new("weir:", &key);
            for name in [
                names.record(),
                names.fixed(u64::MAX),
                names.sliding(u64::MAX),
            ] {
                assert!(valid(&name), "{name:?}");
                assert!(name.contains(":#"), "{name:?}");
            }
        }
    }

    #[test]
    fn the_longest_verbatim_key_still_fits() {
        let prefix = "p".repeat(MAX_PREFIX_LEN);
        let longest = MAX_NAME_LEN - MAX_PREFIX_LEN - MAX_KIND_LEN - 2;
        let names = Names::new(&prefix, &Key::new("k".repeat(longest)).unwrap());
        assert!(names.sliding(u64::MAX).len() <= MAX_NAME_LEN);
        assert!(names.record().contains(":="));
        let names = Names::new(&prefix, &Key::new("k".repeat(longest + 1)).unwrap());
        assert!(names.record().contains(":#"));
    }

    #[test]
    fn every_name_of_a_key_has_its_body() {
        for (prefix, key) in [
            ("weir:", Key::new("login:alice").unwrap()),
            ("a:b:", Key::new("x:y:z").unwrap()),
            ("", Key::new("with space").unwrap()),
        ] {
            let names = Names::new(prefix, &key);
            for name in [names.record(), names.fixed(7), names.sliding(u64::MAX)] {
                assert_eq!(body_of(prefix, &name), Some(names.body()), "{name}");
            }
        }
        assert_eq!(body_of("weir:", "other:r:=k"), None);
        assert_eq!(body_of("weir:", "weir:nocolon"), None);
    }

    #[test]
    fn distinct_keys_get_distinct_names() {
        let a = Names::new("w:", &Key::new("a b").unwrap());
        let b = Names::new("w:", &Key::new("a_b").unwrap());
        let c = Names::new("w:", &Key::new("#00").unwrap());
        assert_ne!(a.record(), b.record());
        assert_ne!(a.record(), c.record());
    }
}
