//! [`StackText`]: a short text written on the stack, for the per-request values that hold
//! an address (the `remote_address` descriptor, `X-Real-IP`, `Forwarded`,
//! `X-Forwarded-For`): formatted without a `String` of their own. A header value made from
//! one is copied once, into the header's own bytes. Used by `limits.rs` and
//! `forwarded.rs`; no decision is made here.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr};

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

    /// `ip` as text (`192.0.2.1`, `2001:db8::1`), as `Display` writes it. An IPv4
    /// address, the common case on every request's way (up to three times: the limits'
    /// descriptor, `X-Real-IP`, the forwarding headers), is written digit by digit: the
    /// formatter took some 900 instructions for one.
    pub(crate) fn ip(ip: IpAddr) -> Self {
        let mut text = Self::new();
        match ip {
            IpAddr::V4(v4) if N >= 15 => text.push_v4(v4),
            _ => {
                let _ = fmt::Write::write_fmt(&mut text, format_args!("{ip}"));
            }
        }
        text
    }

    /// `parts` one after the other (those past `N` are left out whole, as `write_str`
    /// refuses them): a header value made of fixed text and an address, without the
    /// formatter. The parts are texts' bytes, whole (`str::as_bytes`, [`Self::as_bytes`]),
    /// so the result is text too.
    pub(crate) fn concat(parts: &[&[u8]]) -> Self {
        let mut text = Self::new();
        for part in parts {
            let _ = text.push_bytes(part);
        }
        text
    }

    /// Appends a text's bytes whole, or nothing when they do not fit.
    fn push_bytes(&mut self, part: &[u8]) -> fmt::Result {
        let end = self
            .len
            .checked_add(part.len())
            .filter(|&end| end <= N)
            .ok_or(fmt::Error)?;
        self.bytes
            .get_mut(self.len..end)
            .ok_or(fmt::Error)?
            .copy_from_slice(part);
        self.len = end;
        Ok(())
    }

    /// Appends `ip` in dotted decimal (at most 15 bytes; the caller checked the room).
    fn push_v4(&mut self, ip: Ipv4Addr) {
        for (i, octet) in ip.octets().into_iter().enumerate() {
            if i > 0 {
                self.push(b'.');
            }
            if octet >= 100 {
                self.push(b'0' + octet / 100);
            }
            if octet >= 10 {
                self.push(b'0' + octet / 10 % 10);
            }
            self.push(b'0' + octet % 10);
        }
    }

    /// Appends one ASCII byte if there is room (none is lost where the callers use it).
    fn push(&mut self, byte: u8) {
        if let Some(slot) = self.bytes.get_mut(self.len) {
            *slot = byte;
            self.len += 1;
        }
    }

    /// The text.
    pub(crate) fn as_str(&self) -> &str {
        self.bytes
            .get(..self.len)
            .and_then(|bytes| std::str::from_utf8(bytes).ok())
            .unwrap_or_default()
    }

    /// The text's bytes, as written (only whole texts and ASCII digits are: no check
    /// needed for a header value, which takes bytes).
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

impl<const N: usize> fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_bytes(s.as_bytes())
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
        // The IPv4 digits written by hand agree with `Display` on every octet.
        for octet in 0..=255u8 {
            let ip = IpAddr::V4(Ipv4Addr::new(octet, 0, 10, 255 - octet));
            assert_eq!(StackText::<IP_LEN>::ip(ip).as_str(), ip.to_string());
        }
        assert_eq!(
            StackText::<15>::ip("255.255.255.255".parse().unwrap()).as_str(),
            "255.255.255.255"
        );
        let mut forwarded = StackText::<FORWARDED_LEN>::new();
        write!(forwarded, "for=\"[{longest}]\";proto=http").unwrap();
        assert_eq!(
            forwarded.as_str(),
            format!("for=\"[{longest}]\";proto=http")
        );
        let v6 = StackText::<IP_LEN>::ip(longest);
        let parts: [&[u8]; 3] = [b"for=\"[", v6.as_bytes(), b"]\";proto=http"];
        assert_eq!(
            StackText::<FORWARDED_LEN>::concat(&parts).as_bytes(),
            format!("for=\"[{longest}]\";proto=http").as_bytes()
        );
        let mut small = StackText::<4>::new();
        small.write_str("abc").unwrap();
        assert!(small.write_str("de").is_err());
        assert_eq!(small.as_str(), "abc");
        assert_eq!(
            StackText::<4>::concat(&[b"ab", b"cde", b"d"]).as_bytes(),
            b"abd"
        );
    }
}
