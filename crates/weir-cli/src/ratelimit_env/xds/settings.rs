//! envoyproxy/ratelimit's xDS variables, read as its settings (`src/settings/settings.go`)
//! read them, with its defaults: `CONFIG_TYPE=GRPC_XDS_SOTW` turns the xDS rule source on
//! (`FILE`, the default, keeps the rule files); `CONFIG_GRPC_XDS_*` say where the
//! management server is, who this node is and how to reach it over TLS; `XDS_CLIENT_*`
//! tune the client. Every error names its variable. Not here: the stream (`client.rs`).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};

use super::super::vars::Vars;
use super::backoff::Backoff;

/// ratelimit's defaults.
const DEFAULT_SERVER: &str = "localhost:18000";
const DEFAULT_NODE_ID: &str = "default";
const DEFAULT_CONNECT_RETRY: Duration = Duration::from_secs(3);
const DEFAULT_BACKOFF_INITIAL: Duration = Duration::from_secs(10);
const DEFAULT_BACKOFF_MAX: Duration = Duration::from_secs(60);
const DEFAULT_RANDOM_FACTOR: f64 = 0.5;
/// gRPC's default largest message (ratelimit leaves it to gRPC unless set).
const DEFAULT_MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// The most header or metadata pairs read from one variable.
const MAX_PAIRS: usize = 64;

/// Every variable [`read`] maps.
pub(crate) const MAPPED: &[&str] = &[
    "CONFIG_GRPC_XDS_NODE_ID",
    "CONFIG_GRPC_XDS_NODE_METADATA",
    "CONFIG_GRPC_XDS_SERVER_URL",
    "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL",
    "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
    "CONFIG_GRPC_XDS_SERVER_USE_TLS",
    "CONFIG_GRPC_XDS_CLIENT_TLS_CERT",
    "CONFIG_GRPC_XDS_CLIENT_TLS_KEY",
    "CONFIG_GRPC_XDS_SERVER_TLS_CACERT",
    "CONFIG_GRPC_XDS_SERVER_TLS_SAN",
    "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL",
    "XDS_CLIENT_BACKOFF_MAX_INTERVAL",
    "XDS_CLIENT_BACKOFF_RANDOM_FACTOR",
    "XDS_CLIENT_BACKOFF_JITTER",
    "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES",
    "FORCE_START_WITHOUT_INITIAL_CONFIG",
];

/// TLS towards the management server (`CONFIG_GRPC_XDS_SERVER_USE_TLS=true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct XdsTls {
    /// `CONFIG_GRPC_XDS_SERVER_TLS_CACERT`: the CA the server's certificate must chain to.
    pub(crate) ca: PathBuf,
    /// `CONFIG_GRPC_XDS_CLIENT_TLS_CERT` and `_KEY`: this node's certificate, if the
    /// server asks for one.
    pub(crate) identity: Option<(PathBuf, PathBuf)>,
    /// `CONFIG_GRPC_XDS_SERVER_TLS_SAN`: the name the server's certificate must be valid
    /// for (default: the host of the server's address).
    pub(crate) server_name: Option<String>,
}

/// How to reach the management server and who to say this node is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct XdsSettings {
    /// `CONFIG_GRPC_XDS_SERVER_URL`: `host:port`.
    pub(crate) server: String,
    /// `CONFIG_GRPC_XDS_NODE_ID`: the node the server keeps a snapshot for.
    pub(crate) node_id: String,
    /// `CONFIG_GRPC_XDS_NODE_METADATA`: `key=value,…`, sent as the node's metadata.
    pub(crate) node_metadata: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS`: `name:value,…`, sent as gRPC metadata.
    pub(crate) headers: Vec<(String, String)>,
    /// `CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL`: the wait (±50 %) after a failed
    /// connection attempt.
    pub(crate) connect_retry: Duration,
    /// `XDS_CLIENT_BACKOFF_*`: the wait after a stream that broke.
    pub(crate) backoff: Backoff,
    /// `XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES`: the largest update accepted.
    pub(crate) max_message_bytes: usize,
    /// TLS, when asked for.
    pub(crate) tls: Option<XdsTls>,
    /// `MERGE_DOMAIN_CONFIG`: a domain in several resources is merged, not refused.
    pub(crate) merge_domains: bool,
    /// `FORCE_START_WITHOUT_INITIAL_CONFIG`: listen before the first update (not ready,
    /// every domain unknown meanwhile) instead of after it.
    pub(crate) force_start: bool,
}

impl XdsSettings {
    /// Whether the management server is on this host (`localhost` or a loopback address).
    pub(crate) fn is_local(&self) -> bool {
        let host = self.server.rsplit_once(':').map_or("", |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        host.eq_ignore_ascii_case("localhost")
            || host
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The server's URI for the gRPC client.
    pub(crate) fn uri(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.server)
    }
}

/// The xDS settings when `CONFIG_TYPE=GRPC_XDS_SOTW`; `None` for `FILE` (or unset).
pub(crate) fn read(vars: &Vars<'_>) -> anyhow::Result<Option<XdsSettings>> {
    match vars.get("CONFIG_TYPE") {
        None => return Ok(None),
        Some(kind) if kind.eq_ignore_ascii_case("FILE") => return Ok(None),
        Some(kind) if kind.eq_ignore_ascii_case("GRPC_XDS_SOTW") => {}
        Some(kind) => bail!("CONFIG_TYPE={kind:?}: expected FILE or GRPC_XDS_SOTW"),
    }
    let server = vars
        .get("CONFIG_GRPC_XDS_SERVER_URL")
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    if server.contains("://") || server.contains('/') || !server.contains(':') {
        bail!("CONFIG_GRPC_XDS_SERVER_URL={server:?}: expected host:port");
    }
    let backoff = Backoff {
        initial: vars
            .duration("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL")?
            .unwrap_or(DEFAULT_BACKOFF_INITIAL),
        max: vars
            .duration("XDS_CLIENT_BACKOFF_MAX_INTERVAL")?
            .unwrap_or(DEFAULT_BACKOFF_MAX),
        random_factor: vars
            .ratio("XDS_CLIENT_BACKOFF_RANDOM_FACTOR")?
            .unwrap_or(DEFAULT_RANDOM_FACTOR),
        jitter: vars.bool("XDS_CLIENT_BACKOFF_JITTER")?.unwrap_or(true),
    };
    if backoff.max < backoff.initial {
        bail!("XDS_CLIENT_BACKOFF_MAX_INTERVAL: shorter than XDS_CLIENT_BACKOFF_INITIAL_INTERVAL");
    }
    let max_message_bytes = match vars.get("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES") {
        None => DEFAULT_MAX_MESSAGE_BYTES,
        Some(text) => match text.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => bail!("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES={text:?}: not a positive number of bytes"),
        },
    };
    Ok(Some(XdsSettings {
        server,
        node_id: vars
            .get("CONFIG_GRPC_XDS_NODE_ID")
            .unwrap_or_else(|| DEFAULT_NODE_ID.to_string()),
        node_metadata: pairs(vars, "CONFIG_GRPC_XDS_NODE_METADATA", '=')?,
        headers: headers(vars)?,
        connect_retry: vars
            .duration("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL")?
            .unwrap_or(DEFAULT_CONNECT_RETRY),
        backoff,
        max_message_bytes,
        tls: tls(vars)?,
        merge_domains: vars.is_true("MERGE_DOMAIN_CONFIG")?,
        force_start: vars.is_true("FORCE_START_WITHOUT_INITIAL_CONFIG")?,
    }))
}

/// `a<sep>b,c<sep>d` as pairs. As ratelimit, an entry without the separator is skipped
/// for the node's metadata; for headers (`name:value`, envconfig's map form) it is an error.
fn pairs(vars: &Vars<'_>, name: &str, sep: char) -> anyhow::Result<Vec<(String, String)>> {
    let Some(text) = vars.get(name) else {
        return Ok(Vec::new());
    };
    let out: Vec<_> = text
        .split(',')
        .filter_map(|entry| entry.split_once(sep))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if out.len() > MAX_PAIRS {
        bail!("{name}: more than {MAX_PAIRS} entries");
    }
    Ok(out)
}

fn headers(vars: &Vars<'_>) -> anyhow::Result<Vec<(String, String)>> {
    const NAME: &str = "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS";
    if let Some(text) = vars.get(NAME) {
        if text.split(',').any(|entry| !entry.contains(':')) {
            bail!("{NAME}: expected name:value,name:value");
        }
    }
    let headers = pairs(vars, NAME, ':')?;
    for (name, value) in &headers {
        let name = name.to_ascii_lowercase();
        tonic::metadata::MetadataKey::<tonic::metadata::Ascii>::from_bytes(name.as_bytes())
            .with_context(|| format!("{NAME}: {name:?} is not a gRPC metadata name"))?;
        if name.ends_with("-bin") {
            bail!("{NAME}: {name:?}: binary metadata is not supported");
        }
        tonic::metadata::MetadataValue::<tonic::metadata::Ascii>::try_from(value.as_str())
            .with_context(|| format!("{NAME}: the value of {name:?} is not printable ASCII"))?;
    }
    Ok(headers
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect())
}

fn tls(vars: &Vars<'_>) -> anyhow::Result<Option<XdsTls>> {
    if !vars.is_true("CONFIG_GRPC_XDS_SERVER_USE_TLS")? {
        return Ok(None);
    }
    let Some(ca) = vars.get("CONFIG_GRPC_XDS_SERVER_TLS_CACERT") else {
        bail!(
            "CONFIG_GRPC_XDS_SERVER_USE_TLS=true: Weir verifies the xDS server against a CA \
             file only; set CONFIG_GRPC_XDS_SERVER_TLS_CACERT"
        );
    };
    let identity = match (
        vars.get("CONFIG_GRPC_XDS_CLIENT_TLS_CERT"),
        vars.get("CONFIG_GRPC_XDS_CLIENT_TLS_KEY"),
    ) {
        (Some(cert), Some(key)) => Some((PathBuf::from(cert), PathBuf::from(key))),
        (None, None) => None,
        _ => bail!(
            "CONFIG_GRPC_XDS_CLIENT_TLS_CERT and CONFIG_GRPC_XDS_CLIENT_TLS_KEY: set both or neither"
        ),
    };
    Ok(Some(XdsTls {
        ca: PathBuf::from(ca),
        identity,
        server_name: vars.get("CONFIG_GRPC_XDS_SERVER_TLS_SAN"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_with(pairs: &[(&str, &str)]) -> anyhow::Result<Option<XdsSettings>> {
        let owned: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |name: &str| {
            owned
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        read(&Vars::new(&lookup))
    }

    #[test]
    fn upstreams_defaults_apply_and_file_means_no_xds() {
        assert_eq!(read_with(&[]).unwrap(), None);
        assert_eq!(read_with(&[("CONFIG_TYPE", "FILE")]).unwrap(), None);
        let xds = read_with(&[("CONFIG_TYPE", "GRPC_XDS_SOTW")])
            .unwrap()
            .unwrap();
        assert_eq!(xds.uri(), "http://localhost:18000");
        assert_eq!(xds.node_id, "default");
        assert_eq!(xds.connect_retry, Duration::from_secs(3));
        assert_eq!(xds.backoff.initial, Duration::from_secs(10));
        assert_eq!(xds.backoff.max, Duration::from_secs(60));
        assert!(xds.backoff.jitter);
        assert_eq!(xds.max_message_bytes, 4 * 1024 * 1024);
        assert!(xds.tls.is_none());
        assert!(!xds.force_start);
        assert!(xds.is_local());
        let remote = read_with(&[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "xds.example:18000"),
        ]);
        assert!(!remote.unwrap().unwrap().is_local());
        let v6 = read_with(&[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_SERVER_URL", "[::1]:18000"),
        ]);
        assert!(v6.unwrap().unwrap().is_local());
    }

    #[test]
    fn node_metadata_and_headers_read_as_upstream_reads_them() {
        let xds = read_with(&[
            ("CONFIG_TYPE", "GRPC_XDS_SOTW"),
            ("CONFIG_GRPC_XDS_NODE_METADATA", "zone=a,skipped,team=x=y"),
            (
                "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS",
                "X-Token:abc,tenant:t1",
            ),
        ])
        .unwrap()
        .unwrap();
        let own = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect()
        };
        assert_eq!(xds.node_metadata, own(&[("zone", "a"), ("team", "x=y")]));
        assert_eq!(xds.headers, own(&[("x-token", "abc"), ("tenant", "t1")]));
    }

    #[test]
    fn unusable_values_are_errors_naming_the_variable() {
        let err = |pairs: &[(&str, &str)]| {
            let mut all = vec![("CONFIG_TYPE", "GRPC_XDS_SOTW")];
            all.extend_from_slice(pairs);
            read_with(&all).unwrap_err().to_string()
        };
        assert!(read_with(&[("CONFIG_TYPE", "REST")])
            .unwrap_err()
            .to_string()
            .contains("expected FILE or GRPC_XDS_SOTW"));
        assert!(err(&[("CONFIG_GRPC_XDS_SERVER_URL", "http://x:1")]).contains("host:port"));
        assert!(err(&[("CONFIG_GRPC_XDS_SERVER_USE_TLS", "true")])
            .contains("CONFIG_GRPC_XDS_SERVER_TLS_CACERT"));
        assert!(
            err(&[("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "novalue")]).contains("name:value")
        );
        assert!(
            err(&[("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", "bad name:v")])
                .contains("not a gRPC metadata name")
        );
        assert!(err(&[("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", "0")])
            .contains("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"));
        assert!(err(&[
            ("XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", "1m"),
            ("XDS_CLIENT_BACKOFF_MAX_INTERVAL", "1s"),
        ])
        .contains("XDS_CLIENT_BACKOFF_MAX_INTERVAL"));
    }
}
