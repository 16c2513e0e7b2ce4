//! envoyproxy/ratelimit's environment for `weir serve`: a deployment that configured
//! ratelimit with variables (`REDIS_URL`, `RUNTIME_ROOT`, `PORT`, …) runs Weir unchanged.
//! Precedence: a `weir serve` flag, then its `WEIR_*` variable, then ratelimit's variable,
//! then Weir's default (so a bare `weir serve` still binds 127.0.0.1). A variable Weir
//! cannot honour is named in a start-up warning; one whose value Weir cannot use safely
//! stops the start with an error naming it. `--no-ratelimit-env` reads none of them.
//!
//! - `vars.rs`: reading values as ratelimit's settings library does;
//! - `mapping.rs`: listeners, rules, logs, headers, TLS: [`RatelimitEnv`];
//! - `store.rs`: `BACKEND_TYPE`, `REDIS_*`, `MEMCACHE_HOST_PORT` as a `--store` URL;
//! - `stats.rs`: `USE_STATSD`, `STATSD_*`, `STATS_FLUSH_INTERVAL`, `EXTRA_TAGS`, DogStatsD;
//! - `xds/`: `CONFIG_TYPE=GRPC_XDS_SOTW`: rules from an xDS management server;
//! - `unsupported.rs`: the variables Weir does not honour, and why.
//!
//! The full table, one row per variable, is `docs/envoy-ratelimit-env.md`.

mod mapping;
mod stats;
mod store;
mod unsupported;
mod vars;
mod xds;

pub(crate) use mapping::{read, RatelimitEnv};
pub(crate) use xds::{spawn as spawn_xds, XdsSettings};
