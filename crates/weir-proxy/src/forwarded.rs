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

use http::header::{Entry, HeaderName, HeaderValue, FORWARDED, HOST};
use http::HeaderMap;
use hyper::body::Bytes;
use weir_tower::ClientIp;

use crate::text::{StackText, FORWARDED_LEN, IP_LEN};

/// `X-Forwarded-For`.
const X_FORWARDED_FOR: HeaderName = HeaderName::from_static("x-forwarded-for");
/// `X-Forwarded-Proto`.
const X_FORWARDED_PROTO: HeaderName = HeaderName::from_static("x-forwarded-proto");
/// `X-Forwarded-Host`.
const X_FORWARDED_HOST: HeaderName = HeaderName::from_static("x-forwarded-host");
/// `X-Real-IP`.
const X_REAL_IP: HeaderName = HeaderName::from_static("x-real-ip");
/// Whether `name` is a client's claim, passed on only from a trusted proxy (`X-Forwarded-
/// Proto`, `-Host` and `X-Real-IP` are then replaced by the proxy's own; `X-Forwarded-Port`,
/// `-Prefix`, `X-Original-URL` and `X-Rewrite-URL` go with nothing in their place). One
/// `match` on the name: nothing is built per request.
fn is_claim(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "x-forwarded-proto"
            | "x-forwarded-host"
            | "x-real-ip"
            | "x-forwarded-port"
            | "x-forwarded-prefix"
            | "x-original-url"
            | "x-rewrite-url"
    )
}

/// Rewrites the forwarding headers of a request from `peer` (see the module's header):
/// an untrusted peer's claims replaced by the proxy's own, a trusted one's passed on, then
/// this hop appended. Each header this adds is hashed once (no look-up before an insert
/// where the answer is known), and its value written on the stack and copied once into the
/// header: no `String` a request.
pub(crate) fn rewrite(headers: &mut HeaderMap, peer: Option<IpAddr>, trust: &ClientIp) {
    // Room for what this hop adds (X-Real-IP, X-Forwarded-Host, Forwarded,
    // X-Forwarded-For, X-Forwarded-Proto): the map grows once at most.
    headers.reserve(5);
    let trusted = peer.is_some_and(|p| trust.is_trusted(p));
    // Most requests carry none of the claims: one pass over their few names, no hashing.
    if !trusted && headers.keys().any(is_claim) {
        let claims: Vec<HeaderName> = headers.keys().filter(|n| is_claim(n)).cloned().collect();
        for claim in claims {
            headers.remove(claim);
        }
    }
    // The peer's address as text, written once: X-Real-IP (when the client is the peer),
    // `Forwarded` and `X-Forwarded-For` copy it.
    let peer_text = peer.map(|peer| (peer, StackText::<IP_LEN>::ip(peer)));
    // An untrusted peer's X-Real-IP and X-Forwarded-Host are gone: no look-up for them.
    if let Some((peer, text)) = &peer_text {
        if !trusted || !headers.contains_key(&X_REAL_IP) {
            let client = trust.resolve(*peer, headers);
            let client = if client == *peer {
                *text
            } else {
                StackText::ip(client)
            };
            if let Ok(v) = HeaderValue::from_bytes(client.as_bytes()) {
                headers.insert(X_REAL_IP, v);
            }
        }
    }
    if let Some(host) = headers.get(HOST).cloned() {
        if trusted {
            headers.entry(X_FORWARDED_HOST).or_insert(host);
        } else {
            headers.insert(X_FORWARDED_HOST, host);
        }
    }
    append_forwarded(headers, peer_text.as_ref());
}

/// Appends this hop: `Forwarded: for=…;proto=http`, `X-Forwarded-For` and
/// `X-Forwarded-Proto` (existing values are kept: the upstream sees the whole chain; a
/// `X-Forwarded-Proto` reaches here only from a trusted proxy), with the peer's address
/// already written (`for=` and `X-Forwarded-For` copy it).
fn append_forwarded(headers: &mut HeaderMap, peer: Option<&(IpAddr, StackText<IP_LEN>)>) {
    let Some((peer, address)) = peer else { return };
    let address_text = address.as_bytes();
    let forwarded = StackText::<FORWARDED_LEN>::concat(&match peer {
        IpAddr::V4(_) => [b"for=".as_slice(), address_text, b";proto=http"],
        IpAddr::V6(_) => [b"for=\"[".as_slice(), address_text, b"]\";proto=http"],
    });
    if let Ok(v) = HeaderValue::from_bytes(forwarded.as_bytes()) {
        headers.append(FORWARDED, v);
    }
    match headers.entry(X_FORWARDED_FOR) {
        Entry::Occupied(mut chain) => {
            // The first value, this hop added (as the chain is read: one value). A value
            // that is not text is replaced by this hop alone.
            let joined = match chain.get().to_str() {
                Ok(existing) => {
                    let mut joined =
                        Vec::with_capacity(existing.len() + 2 + address.as_bytes().len());
                    joined.extend_from_slice(existing.as_bytes());
                    joined.extend_from_slice(b", ");
                    joined.extend_from_slice(address.as_bytes());
                    HeaderValue::from_maybe_shared(Bytes::from(joined))
                }
                Err(_) => HeaderValue::from_bytes(address.as_bytes()),
            };
            if let Ok(v) = joined {
                chain.insert(v);
            }
        }
        Entry::Vacant(slot) => {
            if let Ok(v) = HeaderValue::from_bytes(address.as_bytes()) {
                slot.insert(v);
            }
        }
    }
    headers
        .entry(X_FORWARDED_PROTO)
        .or_insert(HeaderValue::from_static("http"));
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
