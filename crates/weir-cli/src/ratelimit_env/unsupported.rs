//! envoyproxy/ratelimit's variables that Weir reads but cannot honour: each one set (to
//! anything but a value that asks for what Weir does anyway) becomes a start-up warning
//! naming it and saying what Weir does instead. The variables Weir honours are read in
//! `mapping.rs` and `store.rs`; `docs/envoy-ratelimit-env.md` lists both.

use super::vars::Vars;

/// One variable Weir does not honour.
pub(crate) struct Unsupported {
    /// Its name.
    pub(crate) name: &'static str,
    /// Values that ask for nothing Weir does not do (compared case-insensitively).
    pub(crate) harmless: &'static [&'static str],
    /// What Weir does instead.
    pub(crate) instead: &'static str,
}

const fn u(
    name: &'static str,
    harmless: &'static [&'static str],
    instead: &'static str,
) -> Unsupported {
    Unsupported {
        name,
        harmless,
        instead,
    }
}

const OFF: &[&str] = &["false", "0", "f"];
const METRICS: &str = "Weir serves Prometheus metrics on the HTTP port's /metrics";

/// Every variable of ratelimit's settings that Weir does not honour.
pub(crate) const UNSUPPORTED: &[Unsupported] = &[
    u("GRPC_MAX_CONNECTION_AGE", &[], "Weir closes a gRPC connection after --grpc-idle-timeout without requests instead"),
    u("GRPC_MAX_CONNECTION_AGE_GRACE", &[], "Weir closes a gRPC connection after --grpc-idle-timeout without requests instead"),
    u("USE_DOG_STATSD_MOGRIFIERS", &[], METRICS),
    u("DISABLE_STATS", OFF, METRICS),
    u("PROMETHEUS_ADDR", &[], METRICS),
    u("PROMETHEUS_PATH", &["/metrics"], METRICS),
    u("PROMETHEUS_MAPPER_YAML", &[], "Weir's metric names are fixed (docs/envoy-ratelimit-env.md maps them to ratelimit's)"),
    u("PROMETHEUS_RESPONSE_TIME_AS_MILLISECONDS", OFF, "Weir's latency histograms are in seconds, as Prometheus names them"),
    u("EXPIRATION_JITTER_MAX_SECONDS", &[], "Weir sets each key's expiry exactly (no jitter)"),
    u("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", OFF, "each Weir algorithm defines what a denied request costs"),
    u("REDIS_POOL_SIZE", &[], "Weir multiplexes requests over one connection per Redis node; there is no pool to size"),
    u("REDIS_PIPELINE_LIMIT", &["0"], "Weir sends each command at once (ratelimit ignores it too)"),
    u("REDIS_CLUSTER_PIPELINE_PARALLELISM", &[], "Weir sends each command at once"),
    u("REDIS_POOL_ON_EMPTY_BEHAVIOR", &["wait"], "Weir multiplexes; there is no pool to run empty"),
    u("REDIS_STARTUP_INITIAL_INTERVAL", &[], "Weir starts without waiting for Redis and decides by each rule's failure policy until it answers"),
    u("REDIS_STARTUP_MAX_INTERVAL", &[], "Weir starts without waiting for Redis and decides by each rule's failure policy until it answers"),
    u("REDIS_STARTUP_MAX_ELAPSED_TIME", &[], "Weir starts without waiting for Redis and decides by each rule's failure policy until it answers"),
    u("REDIS_PERSECOND", OFF, "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_SOCKET_TYPE", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_TYPE", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_URL", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_POOL_SIZE", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_AUTH", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_TLS", OFF, "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_SENTINEL_AUTH", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_PIPELINE_WINDOW", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_PIPELINE_LIMIT", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_CLUSTER_PIPELINE_PARALLELISM", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_TIMEOUT", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("REDIS_PERSECOND_POOL_ON_EMPTY_BEHAVIOR", &[], "Weir keeps every limit in one store (REDIS_URL)"),
    u("MEMCACHE_MAX_IDLE_CONNS", &[], "Weir keeps its own connections to each memcached server"),
    u("MEMCACHE_SRV_REFRESH", &[], "Weir does not look memcached servers up by SRV record"),
    u("MEMCACHE_TLS_CLIENT_CERT", &[], "Weir speaks to memcached without TLS"),
    u("MEMCACHE_TLS_CLIENT_KEY", &[], "Weir speaks to memcached without TLS"),
    u("MEMCACHE_TLS_CACERT", &[], "Weir speaks to memcached without TLS"),
    u("MEMCACHE_TLS_SKIP_HOSTNAME_VERIFICATION", OFF, "Weir speaks to memcached without TLS"),
    u("LOCAL_CACHE_SIZE_IN_BYTES", &["0"], "Weir's over-limit cache is always on for a network store and bounded by keys, not bytes"),
    u("QUOTA_MODE", OFF, "Weir honours quota_mode per descriptor in the rule files, not globally"),
    u("RESPONSE_DYNAMIC_METADATA", OFF, "Weir sends no dynamic metadata"),
    u("TRACING_ENABLED", OFF, "Weir writes structured logs, no OpenTelemetry traces"),
    u("TRACING_SERVICE_NAME", &[], "Weir writes structured logs, no OpenTelemetry traces"),
    u("TRACING_SERVICE_NAMESPACE", &[], "Weir writes structured logs, no OpenTelemetry traces"),
    u("TRACING_SERVICE_INSTANCE_ID", &[], "Weir writes structured logs, no OpenTelemetry traces"),
    u("TRACING_EXPORTER_PROTOCOL", &[], "Weir writes structured logs, no OpenTelemetry traces"),
    u("TRACING_SAMPLING_RATE", &[], "Weir writes structured logs, no OpenTelemetry traces"),
];

/// A warning for each unsupported variable set to something Weir does not do.
pub(crate) fn warnings(vars: &Vars<'_>) -> Vec<String> {
    UNSUPPORTED
        .iter()
        .filter_map(|var| {
            let value = vars.get(var.name)?;
            let harmless = var.harmless.iter().any(|h| h.eq_ignore_ascii_case(&value));
            (!harmless).then(|| format!("{} is not honoured: {}", var.name, var.instead))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_variable_set_to_what_weir_cannot_do_is_named_and_a_harmless_one_is_not() {
        let lookup = |name: &str| {
            let value = match name {
                "GRPC_MAX_CONNECTION_AGE" => "1h",
                "DISABLE_STATS" => "false",
                "TRACING_ENABLED" => "true",
                "REDIS_PIPELINE_WINDOW" => "0",
                _ => return None,
            };
            Some(value.to_string())
        };
        let warnings = warnings(&Vars::new(&lookup));
        assert_eq!(
            warnings,
            [
                "GRPC_MAX_CONNECTION_AGE is not honoured: Weir closes a gRPC connection after \
                 --grpc-idle-timeout without requests instead",
                "TRACING_ENABLED is not honoured: Weir writes structured logs, no \
                 OpenTelemetry traces",
            ]
        );
    }

    #[test]
    fn no_variable_is_listed_twice() {
        let mut names: Vec<_> = UNSUPPORTED.iter().map(|u| u.name).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(names.len(), before);
    }
}
