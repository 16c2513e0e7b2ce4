//! Who the client is, behind reverse proxies. The peer address is trusted only as far as
//! the operator says: ONE forwarding header, the one the trusted proxies append
//! ([`ForwardedHeader`]: `X-Forwarded-For` by default, or `Forwarded`, RFC 7239), is read
//! from right to left, each hop skipped only while the address that added it is a
//! configured trusted proxy. The other header is never read: a client cannot slip its own
//! `Forwarded` past a balancer that appends only `X-Forwarded-For`. A header sent by an untrusted peer is ignored entirely, so a client cannot pick
//! its own key by spoofing one. IPv6 clients are grouped by prefix (default /64: one
//! subscriber usually holds a whole /64, and would otherwise get 2^64 fresh budgets).
//!
//! Runs first in the layer's decision path: the resolved address becomes the key of a
//! per-client limit.

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;
use http::HeaderMap;

use ipnet::IpNet;

use crate::net::{canonical, group_v6};

/// Resolves the client address of a request: the peer, or the first untrusted hop of its
/// forwarding headers when the peer is a trusted proxy.
///
/// ```
/// use weir_tower::ClientIp;
///
/// let client_ip = ClientIp::new()
///     .trust("10.0.0.0/8".parse()?)   // the load balancers
///     .ipv6_prefix(56)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientIp {
    trusted: Vec<IpNet>,
    ipv6_prefix: u8,
    header: ForwardedHeader,
}

/// The forwarding header the trusted proxies append, and the only one read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (what most balancers, nginx and Envoy append).
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239), its `for=` parameters.
    Forwarded,
}

impl std::str::FromStr for ForwardedHeader {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "x-forwarded-for" => Ok(Self::XForwardedFor),
            "forwarded" => Ok(Self::Forwarded),
            other => Err(format!(
                "forwarded header '{other}' is not one of x-forwarded-for, forwarded"
            )),
        }
    }
}

impl Default for ClientIp {
    fn default() -> Self {
        Self::new()
    }
}

/// An IPv6 grouping prefix outside 1..=128.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("ipv6 prefix must be 1..=128, got {0}")]
pub struct PrefixError(pub u8);

impl ClientIp {
    /// No trusted proxies (the peer is the client), IPv6 grouped by /64.
    pub fn new() -> Self {
        Self {
            trusted: Vec::new(),
            ipv6_prefix: 64,
            header: ForwardedHeader::default(),
        }
    }

    /// Reads only `header` (default `X-Forwarded-For`): set it to the one your trusted
    /// proxies append.
    pub fn header(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// Trusts the proxies in `net`: their forwarding headers are believed. `net` is an
    /// [`ipnet::IpNet`]: `"10.0.0.0/8".parse()?`, or [`parse_ip_net`](crate::parse_ip_net)
    /// for a bare address too and an error that names the text.
    pub fn trust(mut self, net: IpNet) -> Self {
        self.trusted.push(net);
        self
    }

    /// Groups IPv6 clients by their first `prefix` bits (1..=128; 128 groups nothing).
    pub fn ipv6_prefix(mut self, prefix: u8) -> Result<Self, PrefixError> {
        if !(1..=128).contains(&prefix) {
            return Err(PrefixError(prefix));
        }
        self.ipv6_prefix = prefix;
        Ok(self)
    }

    /// The trusted networks.
    pub fn trusted(&self) -> &[IpNet] {
        &self.trusted
    }

    /// Whether `ip` is a trusted proxy (its forwarding headers are believed). An
    /// IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) counts as its IPv4 address.
    pub fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// The client of a request whose TCP peer is `peer`.
    pub fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = canonical(peer);
        if self.is_trusted(client) {
            // Walk the hops from the nearest one back; stop at the first untrusted address
            // (that is who connected to our first trusted proxy).
            for hop in forwarded_hops(headers, self.header).into_iter().rev() {
                match hop {
                    Some(ip) => {
                        client = canonical(ip);
                        if !self.is_trusted(client) {
                            break;
                        }
                    }
                    // An obfuscated or unparsable hop: trust ends here, keep the last
                    // address that was vouched for.
                    None => break,
                }
            }
        }
        self.group(client)
    }

    /// `ip` as the key it counts under: IPv6 cut to the grouping prefix.
    pub fn group(&self, ip: IpAddr) -> IpAddr {
        group_v6(ip, self.ipv6_prefix)
    }

    /// The client of a request, from its peer address (see [`peer_addr`]); `None` when the
    /// server did not record the peer.
    pub fn of(&self, parts: &Parts) -> Option<IpAddr> {
        peer_addr(&parts.extensions).map(|peer| self.resolve(peer.ip(), &parts.headers))
    }
}

/// The TCP peer of a request: axum's `ConnectInfo<SocketAddr>` (feature `axum`, on by
/// default; serve with `into_make_service_with_connect_info::<SocketAddr>()`), tonic's `TcpConnectInfo`
/// (feature `tonic`, off by default), or a plain `SocketAddr` in the request's extensions (what a hyper
/// server or `weir proxy` inserts).
pub fn peer_addr(extensions: &http::Extensions) -> Option<SocketAddr> {
    let plain = || extensions.get::<SocketAddr>().copied();
    axum_peer(extensions)
        .or_else(plain)
        .or_else(|| tonic_peer(extensions))
}

#[cfg(feature = "axum")]
fn axum_peer(extensions: &http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
        .map(|info| info.0)
}

#[cfg(not(feature = "axum"))]
fn axum_peer(_extensions: &http::Extensions) -> Option<SocketAddr> {
    None
}

#[cfg(feature = "tonic")]
fn tonic_peer(extensions: &http::Extensions) -> Option<SocketAddr> {
    extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
}

#[cfg(not(feature = "tonic"))]
fn tonic_peer(_extensions: &http::Extensions) -> Option<SocketAddr> {
    None
}

/// Every hop's address, nearest last, from `header` only: all `Forwarded` headers' `for=`
/// values, or all `X-Forwarded-For` values. `None` for a hop that is not an IP address
/// (`unknown`, an obfuscated `_token`).
fn forwarded_hops(headers: &HeaderMap, header: ForwardedHeader) -> Vec<Option<IpAddr>> {
    if header == ForwardedHeader::Forwarded {
        let forwarded = headers.get_all(http::header::FORWARDED);
        let mut hops = Vec::new();
        for value in forwarded.iter() {
            let Ok(text) = value.to_str() else {
                hops.push(None);
                continue;
            };
            for element in text.split(',') {
                let node = element.split(';').find_map(|pair| {
                    let (name, value) = pair.trim().split_once('=')?;
                    name.trim()
                        .eq_ignore_ascii_case("for")
                        .then(|| value.trim())
                });
                hops.push(node.and_then(parse_node));
            }
        }
        return hops;
    }
    let mut hops = Vec::new();
    for value in headers.get_all("x-forwarded-for") {
        let Ok(text) = value.to_str() else {
            hops.push(None);
            continue;
        };
        hops.extend(text.split(',').map(|s| parse_node(s.trim())));
    }
    hops
}

/// A `Forwarded` node or `X-Forwarded-For` entry: `1.2.3.4`, `1.2.3.4:80`, `"[2001:db8::1]:80"`,
/// `2001:db8::1`.
fn parse_node(text: &str) -> Option<IpAddr> {
    let text = text.trim_matches('"');
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    let inner = text.strip_prefix('[')?;
    let end = inner.find(']')?;
    inner.get(..end)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(*name, value.parse().unwrap());
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_cannot_choose_its_address() {
        let client = ClientIp::new().trust("10.0.0.0/8".parse().unwrap());
        let spoof = headers(&[("x-forwarded-for", "1.1.1.1")]);
        assert_eq!(client.resolve(ip("203.0.113.9"), &spoof), ip("203.0.113.9"));
        let spoof = headers(&[("forwarded", "for=1.1.1.1")]);
        assert_eq!(client.resolve(ip("203.0.113.9"), &spoof), ip("203.0.113.9"));
    }

    #[test]
    fn trusted_hops_are_skipped_right_to_left() {
        let client = ClientIp::new()
            .trust("10.0.0.0/8".parse().unwrap())
            .trust("192.168.0.0/16".parse().unwrap());
        // client 198.51.100.7 spoofs 1.1.1.1; the edge proxy (192.168.1.1) appended the
        // real address, the inner proxy (10.0.0.2) appended the edge's.
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 198.51.100.7, 192.168.1.1")]);
        assert_eq!(client.resolve(ip("10.0.0.2"), &h), ip("198.51.100.7"));
        // Split over two header lines, same answer.
        let h = headers(&[
            ("x-forwarded-for", "1.1.1.1, 198.51.100.7"),
            ("x-forwarded-for", "192.168.1.1"),
        ]);
        assert_eq!(client.resolve(ip("10.0.0.2"), &h), ip("198.51.100.7"));
        // All hops trusted: the farthest one is the client.
        let h = headers(&[("x-forwarded-for", "10.9.9.9")]);
        assert_eq!(client.resolve(ip("10.0.0.2"), &h), ip("10.9.9.9"));
        // No header: the trusted peer itself.
        assert_eq!(
            client.resolve(ip("10.0.0.2"), &HeaderMap::new()),
            ip("10.0.0.2")
        );
    }

    #[test]
    fn only_the_configured_header_is_read() {
        // Issue 10: a client's own `Forwarded` was believed over the `X-Forwarded-For` the
        // trusted balancer appended. By default only X-Forwarded-For is read.
        let xff = ClientIp::new().trust("10.0.0.0/8".parse().unwrap());
        let h = headers(&[("forwarded", "for=6.6.6.6"), ("x-forwarded-for", "5.5.5.5")]);
        assert_eq!(xff.resolve(ip("10.0.0.1"), &h), ip("5.5.5.5"));
        let h = headers(&[("forwarded", "for=6.6.6.6")]);
        assert_eq!(
            xff.resolve(ip("10.0.0.1"), &h),
            ip("10.0.0.1"),
            "a Forwarded header alone is not read either"
        );
        assert_eq!(
            "Forwarded".parse::<ForwardedHeader>(),
            Ok(ForwardedHeader::Forwarded)
        );
        assert!("via".parse::<ForwardedHeader>().is_err());
    }

    #[test]
    fn forwarded_is_parsed_when_chosen() {
        let client = ClientIp::new()
            .trust("10.0.0.0/8".parse().unwrap())
            .header(ForwardedHeader::Forwarded);
        let h = headers(&[
            (
                "forwarded",
                r#"for=192.0.2.60;proto=http;by=203.0.113.43, for="[2001:db8:cafe::17]:4711""#,
            ),
            ("x-forwarded-for", "5.5.5.5"),
        ]);
        assert_eq!(
            client.resolve(ip("10.0.0.1"), &h),
            ip("2001:db8:cafe::"),
            "the nearest untrusted hop, grouped by /64"
        );
        let h = headers(&[("forwarded", "for=unknown")]);
        assert_eq!(client.resolve(ip("10.0.0.1"), &h), ip("10.0.0.1"));
    }

    #[test]
    fn ipv6_is_grouped_by_prefix() {
        let client = ClientIp::new();
        assert_eq!(
            client.resolve(ip("2001:db8:1:2:aaaa::1"), &HeaderMap::new()),
            ip("2001:db8:1:2::")
        );
        let exact = ClientIp::new().ipv6_prefix(128).unwrap();
        assert_eq!(
            exact.resolve(ip("2001:db8::1"), &HeaderMap::new()),
            ip("2001:db8::1")
        );
        assert_eq!(ClientIp::new().ipv6_prefix(0).unwrap_err(), PrefixError(0));
        assert_eq!(
            client.resolve(ip("::ffff:192.0.2.1"), &HeaderMap::new()),
            ip("192.0.2.1")
        );
    }
}
