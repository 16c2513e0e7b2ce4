//! What this hop tells the upstream about the request: the forwarding headers, rewritten
//! by [`Forward`](crate::Forward) after the limits let a request go and before it leaves.
//!
//! A client's own claims are not passed on as the proxy's. From a peer that is not a
//! trusted proxy (`--trusted-proxy`), `X-Forwarded-Proto`, `X-Forwarded-Host` and
//! `X-Real-IP` are removed and replaced by what the proxy saw: its scheme (`http`), the
//! request's `Host` (kept as the client sent it; none for an HTTP/1.0 request without one)
//! and the peer's address. A backend that builds links from `X-Forwarded-Host` (a password
//! reset mail) or logs and limits by `X-Real-IP` would otherwise take them from anyone.
//! `X-Forwarded-Port` and `X-Forwarded-Prefix` (links, in Spring) and `X-Original-URL` /
//! `X-Rewrite-URL` (the path IIS-style backends route by, instead of the one the proxy
//! limited) are removed, with nothing in their place.
//! From a trusted proxy they are passed on as they came, and filled in where it sent none
//! (`X-Real-IP` then is the client as the proxy resolved it, the address its limits key
//! on). Then this hop is appended: `Forwarded: for=…;proto=http` and `X-Forwarded-For`
//! (existing values kept, so the upstream sees the whole chain; which of them to believe
//! is its own trust setting, as it is the proxy's).

use std::net::IpAddr;

use http::header::{HeaderName, HeaderValue, HOST};
use http::HeaderMap;
use weir_tower::ClientIp;

/// `X-Forwarded-For`.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// `X-Forwarded-Proto`.
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// `X-Forwarded-Host`.
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
/// `X-Real-IP`.
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
/// A client's claims passed on only from a trusted proxy; the first three are replaced by
/// the proxy's own.
const CLAIMS: [HeaderName; 7] = [
    X_FORWARDED_PROTO,
    X_FORWARDED_HOST,
    X_REAL_IP,
    HeaderName::from_static("x-forwarded-port"),
    HeaderName::from_static("x-forwarded-prefix"),
    HeaderName::from_static("x-original-url"),
    HeaderName::from_static("x-rewrite-url"),
];

/// Rewrites the forwarding headers of a request from `peer` (see the module's header):
/// an untrusted peer's claims replaced by the proxy's own, a trusted one's passed on, then
/// this hop appended.
pub(crate) fn rewrite(headers: &mut HeaderMap, peer: Option<IpAddr>, trust: &ClientIp) {
    if !peer.is_some_and(|p| trust.is_trusted(p)) {
        for claim in &CLAIMS {
            headers.remove(claim);
        }
    }
    if let Some(peer) = peer {
        if !headers.contains_key(&X_REAL_IP) {
            let client = trust.resolve(peer, headers);
            if let Ok(v) = HeaderValue::try_from(client.to_string()) {
                headers.insert(X_REAL_IP, v);
            }
        }
    }
    if !headers.contains_key(&X_FORWARDED_HOST) {
        if let Some(host) = headers.get(HOST).cloned() {
            headers.insert(X_FORWARDED_HOST, host);
        }
    }
    append_forwarded(headers, peer);
}

/// Appends this hop: `Forwarded: for=…;proto=http`, `X-Forwarded-For` and
/// `X-Forwarded-Proto` (existing values are kept: the upstream sees the whole chain; a
/// `X-Forwarded-Proto` reaches here only from a trusted proxy).
pub(crate) fn append_forwarded(headers: &mut HeaderMap, peer: Option<IpAddr>) {
    use std::fmt::Write as _;
    let Some(peer) = peer else { return };
    // The address is written once: `for=` holds it, `X-Forwarded-For` copies it.
    let mut forwarded = String::with_capacity(64);
    forwarded.push_str("for=");
    let _ = match peer {
        IpAddr::V4(v4) => write!(forwarded, "{v4}"),
        IpAddr::V6(v6) => write!(forwarded, "\"[{v6}]\""),
    };
    let address = match peer {
        IpAddr::V4(_) => forwarded.get(4..),
        IpAddr::V6(_) => forwarded.get(6..forwarded.len() - 2),
    }
    .unwrap_or_default();
    let xff = match headers.get(&X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
        Some(existing) => format!("{existing}, {address}"),
        None => address.to_owned(),
    };
    forwarded.push_str(";proto=http");
    if let Ok(v) = HeaderValue::try_from(forwarded) {
        headers.append(http::header::FORWARDED, v);
    }
    if let Ok(v) = HeaderValue::try_from(xff) {
        headers.insert(X_FORWARDED_FOR, v);
    }
    if !headers.contains_key(&X_FORWARDED_PROTO) {
        headers.insert(X_FORWARDED_PROTO, HeaderValue::from_static("http"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("shop.example"));
        h.insert(&X_FORWARDED_PROTO, HeaderValue::from_static("https"));
        h.insert(&X_FORWARDED_HOST, HeaderValue::from_static("evil.example"));
        h.insert(&X_REAL_IP, HeaderValue::from_static("1.2.3.4"));
        h.insert(&X_FORWARDED_FOR, HeaderValue::from_static("5.6.7.8"));
        h.insert("x-original-url", HeaderValue::from_static("/admin"));
        h.insert("x-forwarded-prefix", HeaderValue::from_static("/evil"));
        h
    }

    #[test]
    fn an_untrusted_peers_claims_are_replaced_by_what_the_proxy_saw() {
        let mut h = claims();
        let peer = "192.0.2.7".parse().ok();
        rewrite(
            &mut h,
            peer,
            &ClientIp::new().trust("10.0.0.0/8".parse().unwrap()),
        );
        assert_eq!(h[&X_FORWARDED_PROTO], "http");
        assert_eq!(h[&X_FORWARDED_HOST], "shop.example");
        assert_eq!(h[&X_REAL_IP], "192.0.2.7");
        assert_eq!(h[&X_FORWARDED_FOR], "5.6.7.8, 192.0.2.7");
        assert_eq!(h[HOST], "shop.example");
        assert!(h.get("x-original-url").is_none() && h.get("x-forwarded-prefix").is_none());
        // No Host (HTTP/1.0): no X-Forwarded-Host at all, not the client's.
        let mut h = claims();
        h.remove(HOST);
        rewrite(&mut h, peer, &ClientIp::new());
        assert!(h.get(&X_FORWARDED_HOST).is_none());
    }

    #[test]
    fn a_trusted_proxys_claims_are_passed_on_and_filled_in_where_missing() {
        let trust = ClientIp::new().trust("10.0.0.0/8".parse().unwrap());
        let peer = "10.1.2.3".parse().ok();
        let mut h = claims();
        rewrite(&mut h, peer, &trust);
        assert_eq!(h[&X_FORWARDED_PROTO], "https");
        assert_eq!(h[&X_FORWARDED_HOST], "evil.example");
        assert_eq!(h[&X_REAL_IP], "1.2.3.4");
        assert_eq!(h[&X_FORWARDED_FOR], "5.6.7.8, 10.1.2.3");
        assert_eq!(h["x-original-url"], "/admin");
        let mut h = HeaderMap::new();
        h.insert(HOST, HeaderValue::from_static("shop.example"));
        h.insert(&X_FORWARDED_FOR, HeaderValue::from_static("203.0.113.9"));
        rewrite(&mut h, peer, &trust);
        assert_eq!(h[&X_REAL_IP], "203.0.113.9", "the client the balancer saw");
        assert_eq!(h[&X_FORWARDED_HOST], "shop.example");
    }
}
