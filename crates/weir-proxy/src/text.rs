//! [`StackText`]: a short text written on the stack, for the per-request values that hold
//! an address (the `remote_address` descriptor, `X-Real-IP`, `Forwarded`,
//! `X-Forwarded-For`): formatted without a `String` of their own. A header value made from
//! one is copied once, into the header's own bytes. Used by `limits.rs` and
//! `forwarded.rs`; no decision is made here.

use std::fmt;
use std::net::IpAddr;

/// Room for `for="[` + the longest IPv6 text (45 bytes) + `]";proto=http`.
pub(crate) const FORWARDED_LEN: usize = 64;

/// Room for the longest IP address as text (45 bytes at most, as RFC 4291's text forms go; Rust writes 39 at most).
pub(crate) const IP_LEN: usize = 48;

/// Up to `N` bytes of text on the stack. A write past `N` fails (`fmt::Error`) and leaves
/// the text as it was before it.
#[derive(Clone, Copy)]
pub(crate) struct StackText<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    /// Empty.
    pub(crate) const fn new() -> Self {
        Self {
            bytes: [0; N],
            len: 0,
        }
    }

    /// `ip` as text (`192.0.2.1`, `2001:db8::1`).
    pub(crate) fn ip(ip: IpAddr) -> Self {
        let mut text = Self::new();
        let _ = fmt::Write::write_fmt(&mut text, format_args!("{ip}"));
        text
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        self.bytes
            .get(..self.len)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .unwrap_or_default()
    }

    /// The text's bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.as_str().as_bytes()
    }
}

impl<const N: usize> fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let end = self
            .len
            .checked_add(s.len())
            .filter(|&end| end <= N)
            .ok_or(fmt::Error)?;
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

impl<const N: usize> fmt::Debug for StackText<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write as _;

    use super::*;

    #[test]
    fn addresses_fit_and_an_overlong_write_is_refused_whole() {
        let longest: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff".parse().unwrap();
        assert_eq!(
            StackText::<IP_LEN>::ip(longest).as_str(),
            longest.to_string()
        );
        assert_eq!(
            StackText::<IP_LEN>::ip("192.0.2.1".parse().unwrap()).as_str(),
            "192.0.2.1"
        );
        let mut forwarded = StackText::<FORWARDED_LEN>::new();
        write!(forwarded, "for=\"[{longest}]\";proto=http").unwrap();
        assert_eq!(
            forwarded.as_str(),
            format!("for=\"[{longest}]\";proto=http")
        );
        let mut small = StackText::<4>::new();
        small.write_str("abc").unwrap();
        assert!(small.write_str("de").is_err());
        assert_eq!(small.as_str(), "abc");
    }
}
