//! The admin API's bearer token: a secret that is never printed (its `Debug` is redacted)
//! and compared in constant time, so neither logs nor response timing reveal it. The admin
//! routes exist only when one is configured (`WEIR_ADMIN_TOKEN` or `--admin-token-file`).

use std::fmt;

/// A configured admin token. At least 16 bytes, so it cannot be guessed by trying.
#[derive(Clone)]
pub struct AdminToken(Box<[u8]>);

/// Why a token was refused at startup.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TokenError {
    /// Shorter than [`AdminToken::MIN_LEN`] bytes (after trimming whitespace).
    #[error("admin token is {len} bytes, below the minimum of {min}")]
    TooShort {
        /// Its length.
        len: usize,
        /// The minimum.
        min: usize,
    },
}

impl AdminToken {
    /// The shortest token accepted, in bytes.
    pub const MIN_LEN: usize = 16;

    /// A token from its text; surrounding whitespace (a file's trailing newline) is trimmed.
    pub fn new(token: &str) -> Result<Self, TokenError> {
        let token = token.trim();
        if token.len() < Self::MIN_LEN {
            return Err(TokenError::TooShort {
                len: token.len(),
                min: Self::MIN_LEN,
            });
        }
        Ok(Self(token.as_bytes().into()))
    }

    /// Whether `presented` is the token, in time that depends only on the lengths.
    pub fn matches(&self, presented: &[u8]) -> bool {
        constant_time_eq(&self.0, presented)
    }
}

impl fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AdminToken(<redacted>)")
    }
}

/// Compares every byte of the longer input whatever differs, so the time taken does not say
/// where the first difference is.
fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let mut diff = u8::from(expected.len() != presented.len());
    let len = expected.len().max(presented.len());
    for i in 0..len {
        let a = expected.get(i).copied().unwrap_or(0);
        let b = presented.get(i).copied().unwrap_or(0xff);
        diff |= std::hint::black_box(a ^ b);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_whole_tokens_and_never_prints_them() {
        let token = AdminToken::new("  correct-horse-battery\n").unwrap();
        assert!(token.matches(b"correct-horse-battery"));
        assert!(!token.matches(b"correct-horse-batterx"));
        assert!(!token.matches(b"correct-horse-battery-staple"));
        assert!(!token.matches(b""));
        assert!(!format!("{token:?}").contains("horse"));
        assert_eq!(
            AdminToken::new("short").unwrap_err().to_string(),
            "admin token is 5 bytes, below the minimum of 16"
        );
    }
}
