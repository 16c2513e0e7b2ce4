//! Doc-hidden entry points for `tests/allocations.rs`, which counts what the proxy's own
//! steps allocate a request (a counting global allocator needs a test binary of its own,
//! and so a public way in). Not an API.

use std::net::IpAddr;

use http::HeaderMap;
use weir_tower::ClientIp;

/// Rewrites a request head's headers as [`Forward`](crate::Forward) does before the
/// request leaves: hop-by-hop headers removed, the forwarding headers rewritten for a
/// request from `peer`.
pub fn forwarding_headers(headers: &mut HeaderMap, peer: Option<IpAddr>, trust: &ClientIp) {
    crate::forward::strip_hop_by_hop(headers);
    crate::forwarded::rewrite(headers, peer, trust);
}
