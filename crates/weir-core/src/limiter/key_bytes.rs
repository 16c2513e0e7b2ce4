//! How a [`KeyedLimiter`](crate::KeyedLimiter) turns a key of any `Hash` type into the
//! store's key: a [`Hasher`] that keeps what the key's `Hash` writes instead of mixing it —
//! integers as little-endian bytes, `usize` / `isize` (lengths, enum discriminants) as
//! LEB128 varints so they take one byte when small, byte strings as they are. A key whose
//! bytes fit in 8 is one word, the lock-free table's key (a `u64` is itself, an `IpAddr::V4`
//! or a `SocketAddrV4` fits); a longer one is a [`Key`] of its bytes.
//!
//! Where this sits in a decision: the first step of `KeyedLimiter::check_now`, before the
//! store. Two keys the limiter tells apart get two budgets as long as their `Hash` writes
//! tell them apart (std's types do: a `str` ends with `0xff`, a slice starts with its
//! length); keys whose `Hash` writes the same bytes share one budget, never none.

use std::hash::{Hash, Hasher};

use crate::error::KeyError;
use crate::key::Key;

/// A key's bytes: one word when they fit in 8 (zero-padded, little-endian), else all of
/// them.
pub(super) enum KeyBytes {
    /// 8 bytes or fewer, as a word.
    Word(u64),
    /// More than 8 bytes.
    Long(Vec<u8>),
}

impl KeyBytes {
    /// The bytes `key`'s `Hash` writes.
    #[inline(always)]
    pub(super) fn of<Q: Hash + ?Sized>(key: &Q) -> Self {
        let mut writer = Writer::default();
        key.hash(&mut writer);
        if writer.len <= 8 {
            Self::Word(writer.word)
        } else {
            Self::Long(writer.long)
        }
    }

    /// The store's key: `Key::from(word)` for a word (what a [`Limiter`](crate::Limiter)
    /// checking `Key::from(k)` uses, so a `u64` key `k` is `Key::from(k)` there), the bytes
    /// themselves otherwise (longer than 8, so never one of those).
    pub(super) fn key(&self) -> Result<Key, KeyError> {
        match self {
            Self::Word(word) => Ok(Key::from(*word)),
            Self::Long(bytes) => Key::new(bytes),
        }
    }
}

/// The recording hasher.
#[derive(Default)]
struct Writer {
    /// The first 8 bytes, little-endian, while `len <= 8`.
    word: u64,
    /// How many bytes were written.
    len: usize,
    /// Every byte, once there are more than 8.
    long: Vec<u8>,
}

impl Writer {
    #[inline(always)]
    fn push(&mut self, bytes: &[u8]) {
        let end = self.len.saturating_add(bytes.len());
        if self.len <= 8 && end <= 8 {
            if bytes.is_empty() {
                return;
            }
            let mut padded = [0_u8; 8];
            for (slot, byte) in padded.iter_mut().zip(bytes) {
                *slot = *byte;
            }
            // `len < 8` here (a non-empty write ends at most at 8), so the shift is < 64.
            self.word |= u64::from_le_bytes(padded) << (8 * self.len);
            self.len = end;
            return;
        }
        if self.len <= 8 {
            let head = self.word.to_le_bytes();
            self.long
                .extend_from_slice(head.get(..self.len).unwrap_or(&head));
        }
        self.long.extend_from_slice(bytes);
        self.len = end;
    }

    /// LEB128: 7 bits a byte, low first, the high bit set on all but the last.
    #[inline(always)]
    fn push_varint(&mut self, mut n: u64) {
        let mut buf = [0_u8; 10];
        let mut used = 0;
        for slot in &mut buf {
            let low = u8::try_from(n & 0x7f).unwrap_or(0x7f); // 7 bits: always fits
            n >>= 7;
            used += 1;
            if n == 0 {
                *slot = low;
                break;
            }
            *slot = low | 0x80;
        }
        self.push(buf.get(..used).unwrap_or(&buf));
    }
}

impl Hasher for Writer {
    fn finish(&self) -> u64 {
        self.word
    }

    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        self.push(bytes);
    }

    #[inline(always)]
    fn write_u8(&mut self, n: u8) {
        self.push(&[n]);
    }

    #[inline(always)]
    fn write_u16(&mut self, n: u16) {
        self.push(&n.to_le_bytes());
    }

    #[inline(always)]
    fn write_u32(&mut self, n: u32) {
        self.push(&n.to_le_bytes());
    }

    #[inline(always)]
    fn write_u64(&mut self, n: u64) {
        if self.len == 0 {
            // The common key, whole: no shifting or padding.
            self.word = n;
            self.len = 8;
        } else {
            self.push(&n.to_le_bytes());
        }
    }

    #[inline(always)]
    fn write_u128(&mut self, n: u128) {
        self.push(&n.to_le_bytes());
    }

    #[inline(always)]
    fn write_usize(&mut self, n: usize) {
        self.push_varint(n as u64); // usize is at most 64 bits on every supported target
    }

    #[inline(always)]
    fn write_isize(&mut self, n: isize) {
        let n = n as i64; // isize is at most 64 bits on every supported target
        self.push_varint(((n << 1) ^ (n >> 63)) as u64); // zigzag: small magnitudes, few bytes
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

    use super::*;

    fn word<Q: Hash + ?Sized>(key: &Q) -> Option<u64> {
        match KeyBytes::of(key) {
            KeyBytes::Word(w) => Some(w),
            KeyBytes::Long(_) => None,
        }
    }

    #[test]
    fn a_u64_is_its_own_word_and_its_key_is_key_from_it() {
        for k in [0_u64, 1, 42, u64::MAX] {
            assert_eq!(word(&k), Some(k));
            assert_eq!(KeyBytes::of(&k).key().unwrap(), Key::from(k));
        }
    }

    #[test]
    fn small_keys_fit_one_word() {
        let v4 = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
        assert!(word(&v4).is_some(), "an IPv4 address");
        assert!(word(&Ipv4Addr::new(10, 0, 0, 1)).is_some());
        assert!(word(&SocketAddr::from(([10, 0, 0, 1], 443))).is_some());
        assert!(word(&7_u32).is_some());
        assert!(word(&(7_u32, 9_u32)).is_some());
        assert!(word("user:42").is_some(), "7 bytes and the end mark");
        assert!(word(&IpAddr::V6(Ipv6Addr::LOCALHOST)).is_none());
        assert!(word("a longer key").is_none());
    }

    #[test]
    fn distinct_keys_get_distinct_store_keys() {
        let keys: Vec<Key> = [
            KeyBytes::of("a"),
            KeyBytes::of("a\0"),
            KeyBytes::of(""),
            KeyBytes::of("user:42"),
            KeyBytes::of("user:420"),
            KeyBytes::of("a considerably longer key than eight bytes"),
            KeyBytes::of("a considerably longer key than eight bytes!"),
        ]
        .iter()
        .map(|k| k.key().unwrap())
        .collect();
        for (i, a) in keys.iter().enumerate() {
            for b in keys.iter().skip(i + 1) {
                assert_ne!(a, b);
            }
        }
        let ips = [
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        ];
        for (i, a) in ips.iter().enumerate() {
            for b in ips.iter().skip(i + 1) {
                assert_ne!(
                    KeyBytes::of(a).key().unwrap(),
                    KeyBytes::of(b).key().unwrap()
                );
            }
        }
        // A tuple's parts do not run into each other.
        assert_ne!(
            KeyBytes::of(&("ab", "c")).key().unwrap(),
            KeyBytes::of(&("a", "bc")).key().unwrap()
        );
    }

    #[test]
    fn a_borrowed_key_writes_what_its_owner_does() {
        let owned = String::from("tenant-7");
        assert_eq!(
            KeyBytes::of(&owned).key().unwrap(),
            KeyBytes::of("tenant-7").key().unwrap()
        );
    }

    #[test]
    fn varints_are_short_for_small_lengths_and_discriminants() {
        let mut w = Writer::default();
        w.write_usize(3);
        w.write_isize(-1);
        w.write_usize(300);
        assert_eq!(w.len, 4);
        assert_eq!(w.word.to_le_bytes()[..4], [3, 1, 0xac, 0x02]);
    }
}
