//! # weir-proxy
//!
//! `weir proxy`: a reverse proxy that stands in front of a weak backend and applies Weir's
//! rules before forwarding — per-client and global rate limits, request classes (known
//! crawlers by User-Agent, or any header) with their own lower limits and their own
//! upstream, a max in-flight limit towards the backend, and at the limit a `429`, a wait
//! in a bounded queue, or a cheaper fallback upstream.
//!
//! The path of one request: `weir serve`'s accept loop reads it with hyper and hands it
//! to the proxy's service, no router between (the peer address recorded) → `weir serve`'s
//! header limit (`431`) → the screen
//! refuses what HTTP does not allow a proxy to pass on (a missing, doubled or invalid
//! `Host`: `400`; `CONNECT`: `501`; a path spelling backends read differently: `400`, see
//! [`PathMatch`]; an `h2c` offer is ignored) → `weir_tower::RateLimit` asks [`ProxyLimits`] (class → descriptors → the rule files'
//! domain `proxy` → the limiter, all-or-nothing) → reject / queue / degrade, or an
//! in-flight slot → [`Forward`] (upstream chosen; with `--breaker`, an upstream whose circuit
//! is open gives its call to the fallback or a `503` with `Retry-After`, `breaker/`;
//! hop-by-hop headers stripped, `Forwarded`
//! appended, bodies streamed, neither boxed: hyper's `Incoming` in, a [`ProxyBody`] out) →
//! the response, with `RateLimit` headers. A protocol upgrade (WebSocket) takes the same
//! way up to [`Forward`], which sends it on a connection of its own and, on `101`, joins
//! the client's socket to the upstream's (a tunnel: bounded in number, closed when idle
//! and at shutdown; `tunnel.rs`).
//!
//! Whose fault a failure is decides the answer, the log and the metric. The upstream's
//! (unreachable, closed, no response head within [`ProxySettings::upstream_timeout`]) is a
//! `502` / `504` with a WARN naming it (an idempotent request without a body that failed on
//! a keep-alive connection idle for a second or more, which the upstream's idle timer may
//! have closed as it went, is first sent once more on a new connection, as nginx does); a response body that stalls for
//! [`ProxySettings::upstream_body_timeout`] is cut (the client's connection closes before
//! the body ends), with a WARN too. The client's (broken chunked framing or a short
//! body: `400`; a body that sends nothing for [`ProxySettings::client_body_timeout`]:
//! `408`, the connection closed after either) is logged at DEBUG and counted as a client
//! error; the upstream's clock does not run while the proxy waits on the client.
//!
//! The rules, the store and the metrics are the engine's, as for `weir serve`, and the
//! operations and admin API every Weir program serves (`weir-listen`: `/metrics`,
//! `/healthz`, `/readyz`, `/admin/...`, the dashboard; `/v1/check` only with
//! [`ProxySettings::api_routes`]) is on a second listener; the rule files reload the same
//! way.

mod answer;
mod body;
mod breaker;
mod classify;
mod forward;
mod forwarded;
#[doc(hidden)]
pub mod fuzzing;
mod in_flight;
mod limits;
mod pool;
#[doc(hidden)]
pub mod probe;
mod reply;
mod screen;
mod serve;
mod settings;
mod text;
mod tunnel;
mod upstream;

pub use answer::ProxyBody;
pub use breaker::{BreakerError, BreakerSettings};
pub use classify::{classify, classify_headers, Class, ClassError, DEFAULT_CLASS, KNOWN_CRAWLERS};
pub use forward::{Forward, Routes, DEFAULT_MAX_TUNNELS, DEFAULT_TUNNEL_IDLE_TIMEOUT};
pub use limits::{ProxyLimits, ProxyRuleError, DOMAIN};
pub use serve::{run, ProxyError};
pub use settings::{ProxySettings, CRAWLER_PRIORITY, DEFAULT_PRIORITY};
pub use upstream::{Upstream, UpstreamError};
/// The path as backends resolve it (one copy, shared with the tower layer's path conditions).
pub use weir_tower::normalise_path;
/// How the proxy reads request paths for its `path` descriptor, and what it refuses.
pub use weir_tower::{PathMatch, PathRefusal};

/// The proxy's example rules (this crate's `proxy.yaml`, which `config/proxy.yaml` links
/// to), run when no `--config` is given.
pub const EXAMPLE_RULES: &str = include_str!("../proxy.yaml");

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
