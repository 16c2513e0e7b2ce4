//! IP networks (`10.0.0.0/8`, `2001:db8::/32`) for the trusted-proxy list, and the grouping
//! of IPv6 clients by prefix. Pure; used by [`ClientIp`](crate::ClientIp) when it turns a
//! request into a key, before any limit is checked.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

/// An IP network: an address and a prefix length. An address alone is a /32 or /128.
///
/// ```
/// use weir_tower::IpNet;
///
/// let net: IpNet = "10.0.0.0/8".parse()?;
/// assert!(net.contains("10.1.2.3".parse()?));
/// assert!(!net.contains("11.0.0.1".parse()?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpNet {
    addr: IpAddr,
    prefix: u8,
}

/// A network that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{text}' is not an IP network (like 10.0.0.0/8, 192.168.1.7 or 2001:db8::/32): {reason}")]
pub struct IpNetError {
    text: String,
    reason: &'static str,
}

impl IpNet {
    /// The network of `addr` with `prefix` leading bits; host bits are cleared.
    pub fn new(addr: IpAddr, prefix: u8) -> Result<Self, IpNetError> {
        let max = max_prefix(addr);
        if prefix > max {
            return Err(IpNetError {
                text: format!("{addr}/{prefix}"),
                reason: "the prefix is longer than the address",
            });
        }
        Ok(Self {
            addr: mask(addr, prefix),
            prefix,
        })
    }

    /// Whether `ip` is inside the network. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`)
    /// counts as its IPv4 address.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                mask(ip, self.prefix) == self.addr
            }
            _ => false,
        }
    }
}

impl FromStr for IpNet {
    type Err = IpNetError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = |reason| IpNetError {
            text: text.to_string(),
            reason,
        };
        let (addr, prefix) = match text.trim().split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text.trim(), None),
        };
        let addr: IpAddr = addr.parse().map_err(|_| error("not an IP address"))?;
        let prefix = match prefix {
            Some(p) => p
                .parse::<u8>()
                .map_err(|_| error("the prefix is not a number"))?,
            None => max_prefix(addr),
        };
        if prefix > max_prefix(addr) {
            return Err(error("the prefix is longer than the address"));
        }
        Ok(Self {
            addr: mask(addr, prefix),
            prefix,
        })
    }
}

impl fmt::Display for IpNet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

fn max_prefix(addr: IpAddr) -> u8 {
    match addr {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

/// `::ffff:a.b.c.d` as `a.b.c.d`; anything else unchanged.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// `ip` with every bit after the first `prefix` cleared.
pub(crate) fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let kept = bits
                .checked_shr(32u32.saturating_sub(u32::from(prefix)))
                .and_then(|b| b.checked_shl(32u32.saturating_sub(u32::from(prefix))))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(kept))
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let kept = bits
                .checked_shr(128u32.saturating_sub(u32::from(prefix)))
                .and_then(|b| b.checked_shl(128u32.saturating_sub(u32::from(prefix))))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(kept))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks_parse_and_contain() {
        let net: IpNet = "192.168.0.0/16".parse().unwrap();
        assert!(net.contains("192.168.200.1".parse().unwrap()));
        assert!(!net.contains("192.169.0.1".parse().unwrap()));
        assert!(net.contains("::ffff:192.168.1.1".parse().unwrap()));
        let one: IpNet = "10.0.0.7".parse().unwrap();
        assert!(one.contains("10.0.0.7".parse().unwrap()));
        assert!(!one.contains("10.0.0.8".parse().unwrap()));
        let v6: IpNet = "2001:db8::/32".parse().unwrap();
        assert!(v6.contains("2001:db8:1::1".parse().unwrap()));
        assert!(!v6.contains("10.0.0.1".parse().unwrap()));
        let all: IpNet = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()));
        assert_eq!(net.to_string(), "192.168.0.0/16");
    }

    #[test]
    fn bad_networks_say_what_is_wrong() {
        let e = "10.0.0.0/33".parse::<IpNet>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "'10.0.0.0/33' is not an IP network (like 10.0.0.0/8, 192.168.1.7 or 2001:db8::/32): the prefix is longer than the address"
        );
        assert!("bogus".parse::<IpNet>().is_err());
        assert!("10.0.0.0/x".parse::<IpNet>().is_err());
    }

    #[test]
    fn ipv6_masks_to_its_prefix() {
        let ip: IpAddr = "2001:db8:1:2:3:4:5:6".parse().unwrap();
        assert_eq!(mask(ip, 64).to_string(), "2001:db8:1:2::");
        assert_eq!(mask(ip, 128), ip);
        assert_eq!(mask(ip, 0).to_string(), "::");
    }
}
