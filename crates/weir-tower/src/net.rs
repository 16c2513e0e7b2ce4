//! IP networks (`10.0.0.0/8`, `2001:db8::/32`) for the trusted-proxy list, and the grouping
//! of IPv6 clients by prefix. Pure; used by [`ClientIp`](crate::ClientIp) when it turns a
//! request into a key, before any limit is checked. The network type is
//! [`ipnet::IpNet`] (re-exported as `weir_tower::IpNet`, the type hyper-util and
//! axum-client-ip use); this module only adds a parser that also takes a bare address and
//! names what it refused.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv6Net};

/// A network that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("'{text}' is not an IP network (like 10.0.0.0/8, 192.168.1.7 or 2001:db8::/32): {reason}")]
pub struct IpNetError {
    text: String,
    reason: &'static str,
}

/// Parses a network for [`ClientIp::trust`](crate::ClientIp::trust): `10.0.0.0/8`,
/// `2001:db8::/32`, or an address alone (a /32 or /128). Host bits are cleared, so
/// `10.1.2.3/8` is `10.0.0.0/8`. Unlike `IpNet`'s own `FromStr`, it takes a bare address
/// and its error names the text and what is wrong with it (what a command-line option or
/// a configuration file wants to show).
///
/// ```
/// use weir_tower::{parse_ip_net, IpNet};
///
/// let net: IpNet = parse_ip_net("10.0.0.0/8")?;
/// assert!(net.contains(&"10.1.2.3".parse::<std::net::IpAddr>()?));
/// assert_eq!(parse_ip_net("192.168.1.7")?.to_string(), "192.168.1.7/32");
/// assert!(parse_ip_net("10.0.0.0/33").unwrap_err().to_string().contains("'10.0.0.0/33'"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn parse_ip_net(text: &str) -> Result<IpNet, IpNetError> {
    let error = |reason| IpNetError {
        text: text.to_string(),
        reason,
    };
    let (addr, prefix) = match text.trim().split_once('/') {
        Some((addr, prefix)) => (addr, Some(prefix)),
        None => (text.trim(), None),
    };
    let addr: IpAddr = addr.parse().map_err(|_| error("not an IP address"))?;
    let net = match prefix {
        Some(p) => {
            let prefix = p
                .parse::<u8>()
                .map_err(|_| error("the prefix is not a number"))?;
            IpNet::new(addr, prefix).map_err(|_| error("the prefix is longer than the address"))?
        }
        None => IpNet::from(addr),
    };
    Ok(net.trunc())
}

/// `::ffff:a.b.c.d` as `a.b.c.d`; anything else unchanged.
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    }
}

/// An IPv6 address cut to its first `prefix` bits (anything else, or a prefix past 128,
/// unchanged).
pub(crate) fn group_v6(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => Ipv6Net::new(v6, prefix).map_or(ip, |net| IpAddr::V6(net.network())),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn networks_parse_and_contain() {
        let net = parse_ip_net("192.168.0.0/16").unwrap();
        assert!(net.contains(&ip("192.168.200.1")));
        assert!(!net.contains(&ip("192.169.0.1")));
        let one = parse_ip_net("10.0.0.7").unwrap();
        assert!(one.contains(&ip("10.0.0.7")));
        assert!(!one.contains(&ip("10.0.0.8")));
        let v6 = parse_ip_net("2001:db8::/32").unwrap();
        assert!(v6.contains(&ip("2001:db8:1::1")));
        assert!(!v6.contains(&ip("10.0.0.1")));
        let all = parse_ip_net("0.0.0.0/0").unwrap();
        assert!(all.contains(&ip("8.8.8.8")));
        assert_eq!(net.to_string(), "192.168.0.0/16");
        assert_eq!(
            parse_ip_net(" 10.1.2.3/8 ").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(parse_ip_net("2001:db8::1").unwrap().prefix_len(), 128);
    }

    #[test]
    fn bad_networks_say_what_is_wrong() {
        let e = parse_ip_net("10.0.0.0/33").unwrap_err();
        assert_eq!(
            e.to_string(),
            "'10.0.0.0/33' is not an IP network (like 10.0.0.0/8, 192.168.1.7 or 2001:db8::/32): the prefix is longer than the address"
        );
        assert!(parse_ip_net("bogus")
            .unwrap_err()
            .to_string()
            .starts_with("'bogus' is not an IP network"));
        assert!(parse_ip_net("10.0.0.0/x")
            .unwrap_err()
            .to_string()
            .ends_with("the prefix is not a number"));
    }

    #[test]
    fn ipv6_groups_by_its_prefix() {
        let addr = ip("2001:db8:1:2:3:4:5:6");
        assert_eq!(group_v6(addr, 64), ip("2001:db8:1:2::"));
        assert_eq!(group_v6(addr, 128), addr);
        assert_eq!(group_v6(addr, 0), ip("::"));
        assert_eq!(group_v6(ip("192.0.2.1"), 8), ip("192.0.2.1"));
    }

    #[test]
    fn ipv4_mapped_addresses_are_their_ipv4_address() {
        assert_eq!(canonical(ip("::ffff:192.168.1.1")), ip("192.168.1.1"));
        assert_eq!(canonical(ip("2001:db8::1")), ip("2001:db8::1"));
    }
}
