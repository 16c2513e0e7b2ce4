//! Keys: what a limit is counted against (`"login:alice"`, `"api:10.0.0.7"`). Built by the
//! caller (or the server's rule matcher) before any store is touched, and length-bounded so
//! that no client can make a store hold unbounded bytes.

use std::fmt;
use std::sync::Arc;

use crate::error::KeyError;

/// A validated key: 1 to [`Key::MAX_LEN`] bytes. Cheap to clone.
///
/// Namespace keys per rule (`"{rule}:{caller}"`): two rules must not share a key, or they
/// share state.
///
/// ```
/// use weir_core::Key;
/// let key = Key::new("login:alice").unwrap();
/// assert_eq!(key.as_bytes(), b"login:alice");
/// assert!(Key::new("").is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Key(Arc<[u8]>);

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
        Ok(Self(Arc::from(bytes)))
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl From<u64> for Key {
    /// A key from a number (a user id, a hashed IP): its 8 big-endian bytes.
    fn from(n: u64) -> Self {
        Self(Arc::from(n.to_be_bytes().as_slice()))
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({:?})", String::from_utf8_lossy(&self.0))
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&String::from_utf8_lossy(&self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
