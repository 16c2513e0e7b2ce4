//! Whose records a rule's checks touch. A [`Limiter`](crate::Limiter) addresses a record by
//! (rule, key), never by the key alone, so two rules checked on one key can never share a
//! budget or reset each other's state. A rule is told apart by its name when it has one
//! ([`Rule::named`](crate::Rule::named)), else by its parameters. The store sees the
//! scoped key (`<16 hex digits of the scope>:<key>`); stores themselves stay keyed by
//! bytes, and the conformance suite runs them directly.
//!
//! The scope is a stable 64-bit hash (FNV-1a over the name, or over the parameters as this
//! version encodes them), the same on every instance and platform, because it names
//! records in shared stores.

use std::hash::{Hash, Hasher};

/// What identifies a rule's records besides the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scope {
    /// By the rule's parameters (algorithm and lockout; the hash, computed when the rule is
    /// built): changing them starts every key fresh, and two rules with other parameters
    /// never meet.
    Parameters(u64),
    /// By a name (its hash): the rule may change (a new limit or window, even another algorithm) and
    /// its keys keep their state as each algorithm documents.
    Named(u64),
}

/// FNV-1a, 64 bits: fixed, seedless and byte-order independent, so that every instance
/// names a record the same way.
struct Fnv1a(u64);

impl Hasher for Fnv1a {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    // Sizes and discriminants hash as 8 little-endian bytes on every platform.
    fn write_usize(&mut self, n: usize) {
        self.write(&(n as u64).to_le_bytes());
    }

    fn write_isize(&mut self, n: isize) {
        self.write(&(n as i64).to_le_bytes());
    }

    fn write_u16(&mut self, n: u16) {
        self.write(&n.to_le_bytes());
    }

    fn write_u32(&mut self, n: u32) {
        self.write(&n.to_le_bytes());
    }

    fn write_u64(&mut self, n: u64) {
        self.write(&n.to_le_bytes());
    }
}

/// The stable hash of `value`, seeded by a domain tag so names and parameters never meet.
pub(crate) fn stable_hash(tag: &str, value: &impl Hash) -> u64 {
    let mut h = Fnv1a(0xcbf2_9ce4_8422_2325);
    h.write(tag.as_bytes());
    value.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_is_fixed_across_runs_and_platforms() {
        // FNV-1a of the tag, then the name's bytes and the 0xff that ends a str's Hash:
        // records in shared stores are named by it, so it must never change.
        assert_eq!(
            stable_hash("weir-rule-name", &"login"),
            0xf70d_e1da_2475_f24f
        );
        assert_ne!(stable_hash("name", &"login"), stable_hash("name", &"logim"));
        assert_ne!(stable_hash("name", &"x"), stable_hash("rule", &"x"));
    }
}
