//! What envoyproxy/ratelimit's environment asks of `weir serve`: [`read`] turns the
//! variables into [`RatelimitEnv`], the values `serve.rs` uses where no Weir flag or
//! `WEIR_*` variable gave one. Listeners, rules, logs, shadow mode, near-limit ratio,
//! response headers, key prefix and gRPC TLS are read here; the store in `store.rs`; the
//! variables Weir cannot honour are warnings from `unsupported.rs`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use weir_server::{LegacyHeaders, ResponseHeaders};

use super::vars::Vars;
use super::{stats, store, unsupported, xds};
use crate::engine_args::LogFormat;

/// ratelimit's defaults, used for the part of a setting left out (`PORT` without `HOST`).
const DEFAULT_HOST: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
const DEFAULT_PORT: u16 = 8080;
const DEFAULT_GRPC_PORT: u16 = 8081;
const DEFAULT_DEBUG_PORT: u16 = 6070;
const DEFAULT_RUNTIME_ROOT: &str = "/srv/runtime_data/current";
const DEFAULT_APP_DIRECTORY: &str = "config";

/// ratelimit's runtime directory: where its rule files are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RuntimeDir {
    /// `RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/RUNTIME_APPDIRECTORY`.
    pub(crate) dir: PathBuf,
    /// `RUNTIME_IGNOREDOTFILES`.
    pub(crate) ignore_dotfiles: bool,
    /// `MERGE_DOMAIN_CONFIG`: a domain over several files is merged, not refused.
    pub(crate) merge_domains: bool,
}

/// The gRPC listener's TLS files (`GRPC_SERVER_USE_TLS` and its files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsFiles {
    /// `GRPC_SERVER_TLS_CERT`: the certificate chain.
    pub(crate) cert: PathBuf,
    /// `GRPC_SERVER_TLS_KEY`: its private key.
    pub(crate) key: PathBuf,
    /// `GRPC_CLIENT_TLS_CACERT`: clients must show a certificate from this CA.
    pub(crate) client_ca: Option<PathBuf>,
    /// `GRPC_CLIENT_TLS_SAN`: a name their certificate must be valid for.
    pub(crate) client_name: Option<String>,
}

/// What ratelimit's variables ask for; `None` (or `false`) where they say nothing.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct RatelimitEnv {
    /// `HOST` / `PORT`.
    pub(crate) http: Option<SocketAddr>,
    /// `GRPC_HOST` / `GRPC_PORT`.
    pub(crate) grpc: Option<SocketAddr>,
    /// `DEBUG_HOST` / `DEBUG_PORT`: the debug listener (`/rlconfig`).
    pub(crate) debug: Option<SocketAddr>,
    /// The store URL (`store.rs`).
    pub(crate) store: Option<String>,
    /// `REDIS_TIMEOUT`.
    pub(crate) store_timeout: Option<Duration>,
    /// `REDIS_PIPELINE_WINDOW`.
    pub(crate) redis_batch_wait: Option<Duration>,
    /// `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`: not ready while the store does not answer.
    pub(crate) fallback_not_ready: bool,
    /// `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: not ready until rules with a domain are
    /// in force.
    pub(crate) ready_needs_rules: bool,
    /// `RUNTIME_*`.
    pub(crate) rules: Option<RuntimeDir>,
    /// `LOG_LEVEL`, as a Weir log filter.
    pub(crate) log: Option<String>,
    /// `LOG_FORMAT`.
    pub(crate) log_format: Option<LogFormat>,
    /// `SHADOW_MODE`.
    pub(crate) shadow: bool,
    /// `NEAR_LIMIT_RATIO`.
    pub(crate) near_limit_ratio: Option<f64>,
    /// `LIMIT_RESPONSE_HEADERS_ENABLED` and the `LIMIT_*_HEADER` names.
    pub(crate) envoy_headers: Option<ResponseHeaders>,
    /// `CACHE_KEY_PREFIX`.
    pub(crate) key_prefix: Option<String>,
    /// `GRPC_SERVER_USE_TLS` and its files.
    pub(crate) grpc_tls: Option<TlsFiles>,
    /// `CONFIG_TYPE=GRPC_XDS_SOTW` and `CONFIG_GRPC_XDS_*`: rules from an xDS server.
    pub(crate) xds: Option<super::XdsSettings>,
    /// `USE_STATSD` (ratelimit's default: true) and its variables (`stats.rs`).
    pub(crate) statsd: Option<weir_engine::StatsdSettings>,
    /// The variables that were read (for one INFO line).
    pub(crate) present: Vec<&'static str>,
    /// What is not honoured, one line each (start-up WARNs).
    pub(crate) warnings: Vec<String>,
}

impl RatelimitEnv {
    /// Logs which of ratelimit's variables were read, and a WARN for each not honoured.
    pub(crate) fn report(&self) {
        if !self.present.is_empty() {
            tracing::info!(
                variables = %self.present.join(","),
                "read envoyproxy/ratelimit's settings from the environment (Weir's flags and WEIR_* variables take precedence)"
            );
        }
        for warning in &self.warnings {
            tracing::warn!("envoyproxy/ratelimit setting {warning}");
        }
    }
}

/// The variables of [`MAPPED`] that many programs read, so that one set in the environment
/// does not say envoyproxy/ratelimit is in use.
const GENERIC: &[&str] = &["HOST", "PORT", "LOG_LEVEL", "LOG_FORMAT"];

/// Every variable [`read`] maps (the unsupported ones are in `unsupported.rs`).
pub(crate) const MAPPED: &[&str] = &[
    "HOST",
    "PORT",
    "GRPC_HOST",
    "GRPC_PORT",
    "GRPC_UDS",
    "DEBUG_HOST",
    "DEBUG_PORT",
    "GRPC_SERVER_USE_TLS",
    "GRPC_SERVER_TLS_CERT",
    "GRPC_SERVER_TLS_KEY",
    "GRPC_CLIENT_TLS_CACERT",
    "GRPC_CLIENT_TLS_SAN",
    "LOG_LEVEL",
    "LOG_FORMAT",
    "CONFIG_TYPE",
    "RUNTIME_ROOT",
    "RUNTIME_SUBDIRECTORY",
    "RUNTIME_APPDIRECTORY",
    "RUNTIME_IGNOREDOTFILES",
    "RUNTIME_WATCH_ROOT",
    "NEAR_LIMIT_RATIO",
    "CACHE_KEY_PREFIX",
    "BACKEND_TYPE",
    "LIMIT_RESPONSE_HEADERS_ENABLED",
    "LIMIT_LIMIT_HEADER",
    "LIMIT_REMAINING_HEADER",
    "LIMIT_RESET_HEADER",
    "REDIS_SOCKET_TYPE",
    "REDIS_TYPE",
    "REDIS_URL",
    "REDIS_AUTH",
    "REDIS_TLS",
    "REDIS_TLS_CLIENT_CERT",
    "REDIS_TLS_CLIENT_KEY",
    "REDIS_TLS_CACERT",
    "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION",
    "REDIS_SENTINEL_AUTH",
    "REDIS_HEALTH_CHECK_ACTIVE_CONNECTION",
    "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED",
    "REDIS_TIMEOUT",
    "REDIS_PIPELINE_WINDOW",
    "MEMCACHE_HOST_PORT",
    "MEMCACHE_SRV",
    "MEMCACHE_TLS",
    "SHADOW_MODE",
    "USE_PROMETHEUS",
    "MERGE_DOMAIN_CONFIG",
    "USE_STATSD",
    "USE_DOG_STATSD",
    "STATSD_HOST",
    "STATSD_PORT",
    "STATS_FLUSH_INTERVAL",
    "EXTRA_TAGS",
];

/// Reads ratelimit's variables through `lookup`. A value that cannot be used (a port that
/// is not a number, TLS asked without its files, a deployment Weir cannot reach safely) is
/// an error naming the variable.
pub(crate) fn read(lookup: &dyn Fn(&str) -> Option<String>) -> anyhow::Result<RatelimitEnv> {
    let vars = Vars::new(lookup);
    let store = store::read(&vars)?;
    let mut env = RatelimitEnv {
        http: listener(&vars, "HOST", "PORT", DEFAULT_PORT)?,
        grpc: listener(&vars, "GRPC_HOST", "GRPC_PORT", DEFAULT_GRPC_PORT)?,
        debug: listener(&vars, "DEBUG_HOST", "DEBUG_PORT", DEFAULT_DEBUG_PORT)?,
        store: store.url,
        store_timeout: store.timeout,
        redis_batch_wait: store.batch_wait,
        fallback_not_ready: store.health_checks_store,
        ready_needs_rules: vars.is_true("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED")?,
        rules: runtime_dir(&vars)?,
        log: log_level(&vars)?,
        log_format: log_format(&vars)?,
        shadow: vars.is_true("SHADOW_MODE")?,
        near_limit_ratio: vars.ratio("NEAR_LIMIT_RATIO")?,
        envoy_headers: envoy_headers(&vars)?,
        key_prefix: vars.get("CACHE_KEY_PREFIX"),
        grpc_tls: grpc_tls(&vars)?,
        xds: xds::read(&vars)?,
        statsd: None,
        present: Vec::new(),
        warnings: store.warnings,
    };
    if vars.get("GRPC_UDS").is_some() {
        bail!("GRPC_UDS: Weir serves gRPC on TCP only (GRPC_HOST / GRPC_PORT)");
    }
    env.warnings.extend(unsupported::warnings(&vars));
    env.present = MAPPED
        .iter()
        .chain(xds::MAPPED)
        .chain(unsupported::UNSUPPORTED.iter().map(|u| &u.name))
        .copied()
        .filter(|name| vars.get(name).is_some())
        .collect();
    // Whether ratelimit is in use: a variable of its own, not only one of the generic names
    // a platform or a shell sets for any program (a PaaS's `PORT`, a shell's `LOG_LEVEL`).
    // Those are still read, but alone they must not move the rules away from `weir serve`'s
    // own default (to an empty directory: nothing limited) nor turn statsd on.
    let in_use = env.present.iter().any(|name| !GENERIC.contains(name));
    env.statsd = stats::read(&vars, in_use)?;
    // ratelimit in use but no RUNTIME_* variable: its rules are at its default place, never
    // Weir's built-in example (every real domain would be unknown, so unlimited).
    if env.rules.is_none() && env.xds.is_none() && in_use {
        env.rules = Some(RuntimeDir {
            dir: PathBuf::from(DEFAULT_RUNTIME_ROOT).join(DEFAULT_APP_DIRECTORY),
            ignore_dotfiles: vars.is_true("RUNTIME_IGNOREDOTFILES")?,
            merge_domains: vars.is_true("MERGE_DOMAIN_CONFIG")?,
        });
    }
    Ok(env)
}

fn listener(
    vars: &Vars<'_>,
    host_var: &str,
    port_var: &str,
    default_port: u16,
) -> anyhow::Result<Option<SocketAddr>> {
    let host = vars.get(host_var);
    let port = vars.port(port_var)?;
    if host.is_none() && port.is_none() {
        return Ok(None);
    }
    let port = port.unwrap_or(default_port);
    let ip = match host.as_deref() {
        None => DEFAULT_HOST,
        Some("localhost") => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(text) => match text.trim_start_matches('[').trim_end_matches(']').parse() {
            Ok(ip) => ip,
            // A host name, as Go's listener takes it: its first address.
            Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(text, port))
                .ok()
                .and_then(|mut addrs| addrs.next())
                .map(|addr| addr.ip())
                .with_context(|| {
                    format!("{host_var}={text:?}: not an IP address or a host name that resolves")
                })?,
        },
    };
    Ok(Some(SocketAddr::new(ip, port)))
}

fn runtime_dir(vars: &Vars<'_>) -> anyhow::Result<Option<RuntimeDir>> {
    let (root, sub, app) = (
        vars.get("RUNTIME_ROOT"),
        vars.get("RUNTIME_SUBDIRECTORY"),
        vars.get("RUNTIME_APPDIRECTORY"),
    );
    // RUNTIME_WATCH_ROOT changes only what ratelimit watches; Weir watches and polls the
    // directory either way (a swapped root symlink is seen), so both values are honoured.
    vars.bool("RUNTIME_WATCH_ROOT")?;
    let ignore_dotfiles = vars.is_true("RUNTIME_IGNOREDOTFILES")?;
    let merge_domains = vars.is_true("MERGE_DOMAIN_CONFIG")?;
    if root.is_none() && sub.is_none() && app.is_none() {
        return Ok(None);
    }
    let mut dir = PathBuf::from(root.unwrap_or_else(|| DEFAULT_RUNTIME_ROOT.to_string()));
    if let Some(sub) = sub {
        dir.push(sub);
    }
    dir.push(app.unwrap_or_else(|| DEFAULT_APP_DIRECTORY.to_string()));
    Ok(Some(RuntimeDir {
        dir,
        ignore_dotfiles,
        merge_domains,
    }))
}

/// ratelimit's logrus levels as Weir log filters.
fn log_level(vars: &Vars<'_>) -> anyhow::Result<Option<String>> {
    let Some(level) = vars.get("LOG_LEVEL") else {
        return Ok(None);
    };
    let filter = match level.to_ascii_lowercase().as_str() {
        "trace" => "trace",
        "debug" => "debug",
        "info" => "info",
        "warn" | "warning" => "warn",
        "error" | "fatal" | "panic" => "error",
        _ => bail!("LOG_LEVEL={level:?}: expected trace, debug, info, warn, error, fatal or panic"),
    };
    Ok(Some(filter.to_string()))
}

fn log_format(vars: &Vars<'_>) -> anyhow::Result<Option<LogFormat>> {
    match vars.get("LOG_FORMAT").map(|f| f.to_ascii_lowercase()) {
        None => Ok(None),
        Some(f) if f == "json" => Ok(Some(LogFormat::Json)),
        Some(f) if f == "text" => Ok(Some(LogFormat::Text)),
        Some(f) => bail!("LOG_FORMAT={f:?}: expected text or json"),
    }
}

fn envoy_headers(vars: &Vars<'_>) -> anyhow::Result<Option<ResponseHeaders>> {
    if !vars.is_true("LIMIT_RESPONSE_HEADERS_ENABLED")? {
        return Ok(None);
    }
    let defaults = LegacyHeaders::default();
    let name = |var: &str, default: &str| vars.get(var).unwrap_or_else(|| default.to_string());
    let names = LegacyHeaders::new(
        &name("LIMIT_LIMIT_HEADER", defaults.limit()),
        &name("LIMIT_REMAINING_HEADER", defaults.remaining()),
        &name("LIMIT_RESET_HEADER", defaults.reset()),
    )
    .context("LIMIT_*_HEADER")?;
    Ok(Some(ResponseHeaders {
        legacy: Some(names),
        ..ResponseHeaders::NONE
    }))
}

fn grpc_tls(vars: &Vars<'_>) -> anyhow::Result<Option<TlsFiles>> {
    let files = [
        "GRPC_SERVER_TLS_CERT",
        "GRPC_SERVER_TLS_KEY",
        "GRPC_CLIENT_TLS_CACERT",
        "GRPC_CLIENT_TLS_SAN",
    ];
    if !vars.is_true("GRPC_SERVER_USE_TLS")? {
        if let Some(name) = files.iter().find(|f| vars.get(f).is_some()) {
            bail!("{name} is set but GRPC_SERVER_USE_TLS is not true: set GRPC_SERVER_USE_TLS=true to serve gRPC over TLS");
        }
        return Ok(None);
    }
    let (Some(cert), Some(key)) = (
        vars.get("GRPC_SERVER_TLS_CERT"),
        vars.get("GRPC_SERVER_TLS_KEY"),
    ) else {
        bail!("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY");
    };
    let client_ca = vars.get("GRPC_CLIENT_TLS_CACERT").map(PathBuf::from);
    let client_name = vars.get("GRPC_CLIENT_TLS_SAN");
    if client_name.is_some() && client_ca.is_none() {
        bail!("GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT (the CA of client certificates)");
    }
    Ok(Some(TlsFiles {
        cert: cert.into(),
        key: key.into(),
        client_ca,
        client_name,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> anyhow::Result<RatelimitEnv> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        read(&move |name: &str| map.get(name).cloned())
    }

    #[test]
    fn an_empty_environment_asks_for_nothing() {
        assert_eq!(env(&[]).unwrap(), RatelimitEnv::default());
    }

    #[test]
    fn ratelimits_deployment_variables_map_to_weirs_settings() {
        let e = env(&[
            ("USE_STATSD", "false"),
            ("LOG_LEVEL", "WARN"),
            ("LOG_FORMAT", "json"),
            ("REDIS_SOCKET_TYPE", "tcp"),
            ("REDIS_URL", "redis:6379"),
            ("RUNTIME_ROOT", "/data"),
            ("RUNTIME_SUBDIRECTORY", "ratelimit"),
            ("RUNTIME_WATCH_ROOT", "false"),
            ("RUNTIME_IGNOREDOTFILES", "true"),
            ("PORT", "9080"),
            ("GRPC_HOST", "127.0.0.1"),
            ("SHADOW_MODE", "true"),
            ("NEAR_LIMIT_RATIO", "0.9"),
            ("CACHE_KEY_PREFIX", "rl_"),
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("LIMIT_REMAINING_HEADER", "X-Left"),
            ("DEBUG_PORT", "6070"),
            ("TRACING_ENABLED", "true"),
            ("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "true"),
        ])
        .unwrap();
        assert!(e.ready_needs_rules);
        assert_eq!(env_addr(e.http), "0.0.0.0:9080");
        assert_eq!(env_addr(e.grpc), "127.0.0.1:8081");
        assert_eq!(e.store.as_deref(), Some("redis://redis:6379"));
        assert_eq!(
            e.rules,
            Some(RuntimeDir {
                dir: PathBuf::from("/data/ratelimit/config"),
                ignore_dotfiles: true,
                merge_domains: false,
            })
        );
        assert_eq!(e.log.as_deref(), Some("warn"));
        assert_eq!(e.log_format, Some(LogFormat::Json));
        assert!(e.shadow);
        assert_eq!(e.near_limit_ratio, Some(0.9));
        assert_eq!(e.key_prefix.as_deref(), Some("rl_"));
        let legacy = e.envoy_headers.unwrap().legacy.unwrap();
        assert_eq!(
            (legacy.limit(), legacy.remaining(), legacy.reset()),
            ("RateLimit-Limit", "X-Left", "RateLimit-Reset")
        );
        assert_eq!(e.warnings.len(), 1, "{:?}", e.warnings);
        assert!(e.warnings[0].starts_with("TRACING_ENABLED is not honoured"));
        assert_eq!(env_addr(e.debug), "0.0.0.0:6070");
        assert!(e.present.contains(&"REDIS_URL") && e.present.contains(&"USE_STATSD"));
    }

    fn env_addr(addr: Option<SocketAddr>) -> String {
        addr.unwrap().to_string()
    }

    #[test]
    fn grpc_tls_needs_its_files_and_a_bad_value_names_its_variable() {
        let tls = env(&[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", "/c.pem"),
            ("GRPC_SERVER_TLS_KEY", "/k.pem"),
            ("GRPC_CLIENT_TLS_CACERT", "/ca.pem"),
            ("GRPC_CLIENT_TLS_SAN", "envoy.internal"),
        ])
        .unwrap()
        .grpc_tls
        .unwrap();
        assert_eq!(tls.client_ca, Some(PathBuf::from("/ca.pem")));
        assert_eq!(tls.client_name.as_deref(), Some("envoy.internal"));
        let err = |pairs: &[(&str, &str)]| format!("{:#}", env(pairs).unwrap_err());
        assert!(err(&[("GRPC_SERVER_USE_TLS", "true")]).contains("needs GRPC_SERVER_TLS_CERT"));
        assert!(err(&[
            ("GRPC_SERVER_USE_TLS", "true"),
            ("GRPC_SERVER_TLS_CERT", "/c"),
            ("GRPC_SERVER_TLS_KEY", "/k"),
            ("GRPC_CLIENT_TLS_SAN", "envoy")
        ])
        .starts_with("GRPC_CLIENT_TLS_SAN needs GRPC_CLIENT_TLS_CACERT"));
        assert!(err(&[("GRPC_SERVER_TLS_CERT", "/c")]).contains("GRPC_SERVER_USE_TLS is not true"));
        assert_eq!(
            err(&[("PORT", "http")]),
            "PORT=\"http\": not a port number (0 to 65535)"
        );
        assert!(err(&[("HOST", "no-such-host.invalid")])
            .starts_with("HOST=\"no-such-host.invalid\": not an IP address or a host name"));
        assert!(err(&[("LOG_LEVEL", "loud")]).starts_with("LOG_LEVEL=\"loud\""));
        assert!(err(&[("NEAR_LIMIT_RATIO", "1.5")]).starts_with("NEAR_LIMIT_RATIO=\"1.5\""));
        assert!(err(&[("CONFIG_TYPE", "REST")]).contains("expected FILE or GRPC_XDS_SOTW"));
        assert!(err(&[("GRPC_UDS", "/tmp/rl.sock")]).starts_with("GRPC_UDS"));
        assert!(err(&[
            ("LIMIT_RESPONSE_HEADERS_ENABLED", "true"),
            ("LIMIT_LIMIT_HEADER", "bad name")
        ])
        .contains("not a valid HTTP header name"));
    }

    #[test]
    fn the_runtime_directory_takes_ratelimits_defaults_for_the_parts_left_out() {
        let e = env(&[("RUNTIME_SUBDIRECTORY", "rl")]).unwrap();
        assert_eq!(
            e.rules.unwrap().dir,
            PathBuf::from("/srv/runtime_data/current/rl/config")
        );
        let e = env(&[("RUNTIME_ROOT", "/r"), ("RUNTIME_APPDIRECTORY", "rules")]).unwrap();
        assert_eq!(e.rules.unwrap().dir, PathBuf::from("/r/rules"));
    }

    /// Issue 28: ratelimit's variables without a RUNTIME_* one read ratelimit's default
    /// runtime directory (`/srv/runtime_data/current/config`), never the built-in example
    /// rules, whose domain no real request names (every request unlimited).
    #[test]
    fn ratelimits_variables_without_runtime_ones_read_its_default_directory() {
        let e = env(&[("REDIS_URL", "redis:6379"), ("MERGE_DOMAIN_CONFIG", "true")]).unwrap();
        assert_eq!(
            e.rules,
            Some(RuntimeDir {
                dir: PathBuf::from("/srv/runtime_data/current/config"),
                ignore_dotfiles: false,
                merge_domains: true,
            })
        );
        assert!(e.warnings.is_empty(), "{:?}", e.warnings);
        assert_eq!(env(&[]).unwrap().rules, None);
    }

    /// A platform's `PORT` or a shell's `LOG_LEVEL` alone is no sign of ratelimit: `weir
    /// serve` keeps its own rules (it used to move them to ratelimit's default directory,
    /// empty on such a host: nothing limited) and sends no statsd.
    #[test]
    fn generic_variables_alone_do_not_switch_to_ratelimits_runtime_directory() {
        let e = env(&[
            ("PORT", "9080"),
            ("LOG_LEVEL", "info"),
            ("HOST", "127.0.0.1"),
        ])
        .unwrap();
        assert_eq!(e.rules, None);
        assert!(e.statsd.is_none());
        let e = env(&[("PORT", "9080"), ("USE_STATSD", "false")]).unwrap();
        assert!(
            e.rules.is_some(),
            "a variable of ratelimit's own says it is in use"
        );
    }
}
