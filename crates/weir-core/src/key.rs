//! Keys: what a limit is counted against (`"login:alice"`, `"api:10.0.0.7"`). Built by the
//! caller (or the server's rule matcher) before any store is touched, and length-bounded so
//! that no client can make a store hold unbounded bytes.

use std::fmt;
use std::sync::Arc;

use crate::error::KeyError;

/// A validated key: 1 to [`Key::MAX_LEN`] bytes. Cheap to clone.
///
/// A [`Limiter`](crate::Limiter) keeps each rule's records apart (see
/// [`Rule::named`](crate::Rule::named)), so one key may be checked under several rules.
///
/// ```
/// use weir_core::Key;
/// let key = Key::new("login:alice").unwrap();
/// assert_eq!(key.as_bytes(), b"login:alice");
/// assert!(Key::new("").is_err());
/// ```
#[derive(Clone)]
pub struct Key(Repr);

/// Short keys (user ids, IPs, hashed ids: the common case) live inline, so building one
/// allocates nothing; longer ones are shared behind an `Arc`.
#[derive(Clone)]
enum Repr {
    Inline { len: u8, bytes: [u8; INLINE] },
    Shared(Arc<[u8]>),
}

/// Keys up to this many bytes are stored inline.
const INLINE: usize = 30;

impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for Key {}

impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl Key {
    fn from_valid(bytes: &[u8]) -> Self {
        match u8::try_from(bytes.len()) {
            Ok(len) if bytes.len() <= INLINE => {
                let mut inline = [0u8; INLINE];
                inline[..bytes.len()].copy_from_slice(bytes);
                Self(Repr::Inline { len, bytes: inline })
            }
            _ => Self(Repr::Shared(Arc::from(bytes))),
        }
    }
}

impl Key {
    /// The longest key accepted, in bytes.
    pub const MAX_LEN: usize = 512;

    /// Validates and builds a key.
    pub fn new(key: impl AsRef<[u8]>) -> Result<Self, KeyError> {
        let bytes = key.as_ref();
        if bytes.is_empty() {
            return Err(KeyError::Empty);
        }
        if bytes.len() > Self::MAX_LEN {
            return Err(KeyError::TooLong {
                len: bytes.len(),
                max: Self::MAX_LEN,
            });
        }
        Ok(Self::from_valid(bytes))
    }

    /// This key as one rule's record name, `<scope as 16 hex digits>:<key>` (see
    /// [`Rule::scope`](crate::Rule::scope)); what a [`Limiter`](crate::Limiter) hands its
    /// store. It may be up to 17 bytes longer than [`Key::MAX_LEN`].
    pub(crate) fn scoped(&self, scope: u64) -> Key {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut head = [b':'; 17];
        for (i, digit) in head.iter_mut().take(16).enumerate() {
            let nibble = ((scope >> (60 - 4 * i)) & 0xf).to_le_bytes()[0];
            *digit = HEX.get(usize::from(nibble)).copied().unwrap_or(b'0');
        }
        let key = self.as_bytes();
        let len = head.len() + key.len();
        match u8::try_from(len) {
            Ok(short) if len <= INLINE => {
                let mut bytes = [0u8; INLINE];
                bytes[..head.len()].copy_from_slice(&head);
                bytes[head.len()..len].copy_from_slice(key);
                Self(Repr::Inline { len: short, bytes })
            }
            _ => Self(Repr::Shared(head.iter().chain(key).copied().collect())),
        }
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(bytes),
            Repr::Shared(bytes) => bytes,
        }
    }
}

impl From<u64> for Key {
    /// A key from a number (a user id, a hashed IP): its 8 big-endian bytes.
    fn from(n: u64) -> Self {
        Self::from_valid(&n.to_be_bytes())
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", String::from_utf8_lossy(self.as_bytes()))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_shared_keys_compare_by_bytes() {
        let short = Key::new("user:42").unwrap();
        let long = Key::new("x".repeat(100)).unwrap();
        assert_eq!(short.as_bytes(), b"user:42");
        assert_eq!(long.as_bytes().len(), 100);
        assert_eq!(Key::from(7), Key::new(7u64.to_be_bytes()).unwrap());
        assert_eq!(std::mem::size_of::<Key>(), 32);
        let edge = Key::new([b'a'; INLINE]).unwrap();
        assert_eq!(edge.as_bytes(), [b'a'; INLINE]);
    }

    #[test]
    fn rejects_a_key_one_byte_too_long() {
        assert!(Key::new(vec![b'a'; Key::MAX_LEN]).is_ok());
        assert_eq!(
            Key::new(vec![b'a'; Key::MAX_LEN + 1]),
            Err(KeyError::TooLong {
                len: Key::MAX_LEN + 1,
                max: Key::MAX_LEN
            })
        );
    }
}
