//! # weir-names
//!
//! How Weir names things on the wire, written once for every way in:
//!
//! - **store keys** (`key.rs`): a descriptor's entries under a domain become
//!   `{domain}/{key}={value}/…`, escaped so that two different requests never share a
//!   key, and shortened with a SHA-256 digest past [`weir_core::Key::MAX_LEN`]. The rule
//!   files' matcher (`weir-config`) and the tower layer's policies (`weir-tower`) build
//!   their keys here, so one naming scheme and one bound hold everywhere.
//! - **rate-limit headers** (`headers.rs`): the IETF `RateLimit-Policy` / `RateLimit`
//!   fields and `X-RateLimit-*`, rendered from the limits that applied ([`Applied`]) by the
//!   tower layer, `weir proxy` and `weir serve`'s HTTP API alike.
//!
//! A leaf: it depends on `weir-core`, `sha2`, `itoa` and `bytes` only.
//!
//! ```
//! let key = weir_names::descriptor_key("api", &[("user", "alice")]);
//! assert_eq!(key.to_string(), "api/user=alice");
//! assert_eq!(weir_names::ceil_secs(std::time::Duration::from_millis(1001)), 2);
//! ```

mod headers;
mod key;

pub use headers::{
    ceil_secs, policy_value, put_header_values, rate_limit_headers, render_headers, tightest,
    Applied, HeaderStyle,
};
pub use key::{descriptor_key, override_key, shorten_to};

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
