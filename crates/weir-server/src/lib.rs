//! # weir-server
//!
//! `weir serve`: Weir's decision server (being built). HTTP/JSON and Envoy's rate limit
//! gRPC API over `weir-config` rules, with hot reload, metrics and an admin API.

mod admin_token;
mod envoy_unit;
mod heavy_hitters;
mod shared_clock;

pub use admin_token::{AdminToken, TokenError};
pub use envoy_unit::{envoy_limit, EnvoyLimit};
pub use heavy_hitters::{HeavyHitter, TopDenied};
pub use shared_clock::SharedClock;
