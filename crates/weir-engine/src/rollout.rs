//! Gradual roll-out: a rule with `enforce_percent: X` enforces its denials for X% of keys.
//!
//! The draw is **deterministic per key**, not random per request: a key (one client under
//! one rule) is either inside the enforced share or outside it, every time and on every
//! instance (the hash is unseeded FNV-1a over the key's bytes, stable across processes and
//! versions). Raising the percentage only adds keys; nobody flips between limited and not
//! from one request to the next. Denials outside the share are reported and counted as
//! shadow denials.

use weir_core::Key;

/// Whether a denial of `key` under a rule enforcing `percent`% of keys is enforced.
///
/// ```
/// use weir_core::Key;
/// use weir_engine::enforced;
/// let key = Key::new("api.user:alice").unwrap();
/// assert!(enforced(&key, 100));
/// assert!(!enforced(&key, 0));
/// assert_eq!(enforced(&key, 50), enforced(&key, 50), "the same key, the same answer");
/// ```
pub fn enforced(key: &Key, percent: u8) -> bool {
    if percent >= 100 {
        return true;
    }
    bucket(key.as_bytes()) < u64::from(percent)
}

/// The key's bucket, 0 to 99.
fn bucket(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash % 100
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_of_keys_enforced_follows_the_percentage() {
        let keys: Vec<Key> = (0..10_000)
            .map(|i| Key::new(format!("d.user:{i}")).unwrap())
            .collect();
        for percent in [0u8, 10, 50, 90, 100] {
            let share = keys.iter().filter(|k| enforced(k, percent)).count();
            let expected = usize::from(percent) * 100;
            assert!(
                share.abs_diff(expected) <= 250,
                "{percent}%: {share} of 10000"
            );
        }
        // Monotone: a key enforced at 10% is enforced at 50%.
        assert!(keys.iter().all(|k| !enforced(k, 10) || enforced(k, 50)));
    }
}
