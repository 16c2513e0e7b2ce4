//! envoyproxy/ratelimit's xDS rule source (`CONFIG_TYPE=GRPC_XDS_SOTW`): rules arrive as
//! `RateLimitConfig` resources over ADS (state of the world) from a management server,
//! instead of from files, and each update is a reload of the engine's rules.
//!
//! - `settings.rs`: `CONFIG_GRPC_XDS_*` and `XDS_CLIENT_*` read as ratelimit reads them;
//! - `convert.rs`: `RateLimitConfig` resources into a `RuleSet`, through the rule-file loader;
//! - `backoff.rs`: the delays between connection attempts (bounded, jittered);
//! - `client.rs`: the ADS stream: subscribe, apply, ACK or NACK, reconnect.

mod backoff;
mod client;
mod convert;
mod settings;

pub(crate) use client::spawn;
pub(crate) use settings::{read, XdsSettings, MAPPED};
