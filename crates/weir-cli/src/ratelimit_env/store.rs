//! The store envoyproxy/ratelimit's variables describe, as a `--store` URL: `BACKEND_TYPE`,
//! `REDIS_*` (socket type, deployment type, auth, TLS, timeout) and `MEMCACHE_HOST_PORT`.
//! Whatever asks for more safety than Weir can give (TLS to a Redis Cluster or Sentinel,
//! memcached over TLS) is an error, never a quiet downgrade; what Weir does not need
//! (pool sizes, pipelining) is a warning (`unsupported.rs`).

use std::time::Duration;

use anyhow::bail;

use super::vars::Vars;

/// ratelimit's default `REDIS_URL` (a twemproxy socket).
const DEFAULT_REDIS_URL: &str = "/var/run/nutcracker/ratelimit.sock";

/// The store the variables ask for.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct StoreChoice {
    /// The `--store` URL, when the variables name a store.
    pub(crate) url: Option<String>,
    /// `REDIS_TIMEOUT`, for `--store-timeout`.
    pub(crate) timeout: Option<Duration>,
    /// `REDIS_PIPELINE_WINDOW` when above zero, for `--redis-batch-wait`.
    pub(crate) batch_wait: Option<Duration>,
    /// Whether `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION` asks for the store in readiness.
    pub(crate) health_checks_store: bool,
    /// Warnings about what was read.
    pub(crate) warnings: Vec<String>,
}

/// Reads the store variables.
pub(crate) fn read(vars: &Vars<'_>) -> anyhow::Result<StoreChoice> {
    let backend = vars.get("BACKEND_TYPE").map(|b| b.to_ascii_lowercase());
    let backend = match backend.as_deref() {
        Some(b) => Some(b.to_string()),
        None if vars.get("REDIS_URL").is_some() => Some("redis".to_string()),
        None if vars.get("MEMCACHE_HOST_PORT").is_some() => Some("memcache".to_string()),
        None => None,
    };
    match backend.as_deref() {
        None => Ok(StoreChoice::default()),
        Some("redis") => redis(vars),
        Some("memcache") => memcache(vars),
        Some(other) => bail!(
            "BACKEND_TYPE={other:?}: Weir's stores for envoyproxy/ratelimit's backends are \
             redis and memcache"
        ),
    }
}

fn redis(vars: &Vars<'_>) -> anyhow::Result<StoreChoice> {
    let mut out = StoreChoice {
        timeout: vars.duration("REDIS_TIMEOUT")?,
        batch_wait: vars
            .duration("REDIS_PIPELINE_WINDOW")?
            .filter(|window| !window.is_zero()),
        health_checks_store: vars.is_true("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION")?,
        ..StoreChoice::default()
    };
    if out.timeout == Some(Duration::ZERO) {
        bail!("REDIS_TIMEOUT=\"0\": every store call needs a timeout above zero");
    }
    let url = vars
        .get("REDIS_URL")
        .unwrap_or_else(|| DEFAULT_REDIS_URL.to_string());
    if url.contains("://") {
        // Already a Weir store URL: taken as it is.
        for ignored in ["REDIS_AUTH", "REDIS_TYPE", "REDIS_SOCKET_TYPE", "REDIS_TLS"] {
            if vars.get(ignored).is_some() {
                out.warnings.push(format!(
                    "{ignored} is not used: REDIS_URL is a full URL, which says it all"
                ));
            }
        }
        out.url = Some(url);
        return Ok(out);
    }
    let socket = match vars.get("REDIS_SOCKET_TYPE") {
        Some(s) => s.to_ascii_lowercase(),
        // ratelimit's default is unix; a host:port can only be TCP.
        None if url.starts_with('/') => "unix".to_string(),
        None => "tcp".to_string(),
    };
    let kind = vars
        .get("REDIS_TYPE")
        .map_or_else(|| "single".to_string(), |t| t.to_ascii_lowercase());
    let tls = vars.is_true("REDIS_TLS")?;
    let auth = vars
        .get("REDIS_AUTH")
        .map(|auth| match auth.split_once(':') {
            Some((user, pass)) => format!("{}:{}@", encode(user), encode(pass)),
            None => format!(":{}@", encode(&auth)),
        });
    if vars.is_true("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION")? {
        out.warnings.push(
            "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION is not honoured: Weir always verifies the \
             Redis server's name (put the name its certificate holds in REDIS_URL)"
                .to_string(),
        );
    }
    if vars.get("REDIS_SENTINEL_AUTH").is_some() {
        out.warnings.push(
            "REDIS_SENTINEL_AUTH is not honoured: Weir asks the sentinels without credentials \
             (REDIS_AUTH is the data nodes')"
                .to_string(),
        );
    }
    out.url = Some(match (socket.as_str(), kind.as_str()) {
        ("unix", "single") => {
            if tls {
                bail!(
                    "REDIS_TLS=true with REDIS_SOCKET_TYPE=unix: Weir has no TLS on a Unix socket"
                );
            }
            let mut query = Vec::new();
            if let Some(auth) = vars.get("REDIS_AUTH") {
                match auth.split_once(':') {
                    Some((user, pass)) => {
                        query.push(format!("user={}", encode(user)));
                        query.push(format!("pass={}", encode(pass)));
                    }
                    None => query.push(format!("pass={}", encode(&auth))),
                }
            }
            let query = if query.is_empty() {
                String::new()
            } else {
                format!("?{}", query.join("&"))
            };
            format!("unix://{url}{query}")
        }
        ("unix", other) => {
            bail!("REDIS_TYPE={other:?} with REDIS_SOCKET_TYPE=unix: a {other} deployment is reached over TCP")
        }
        ("tcp", "single") => {
            let scheme = if tls { "rediss" } else { "redis" };
            let query = if tls {
                tls_query(vars)?
            } else {
                no_tls_files(vars)?
            };
            format!("{scheme}://{}{url}{query}", auth.unwrap_or_default())
        }
        ("tcp", "cluster") => {
            if tls {
                bail!("REDIS_TLS=true with REDIS_TYPE=cluster: Weir speaks TLS to a single Redis node only");
            }
            no_tls_files(vars)?;
            format!("redis+cluster://{}{url}", auth.unwrap_or_default())
        }
        ("tcp", "sentinel") => {
            if tls {
                bail!("REDIS_TLS=true with REDIS_TYPE=sentinel: Weir speaks TLS to a single Redis node only");
            }
            no_tls_files(vars)?;
            let Some((master, sentinels)) = url.split_once(',') else {
                bail!(
                    "REDIS_URL with REDIS_TYPE=sentinel: expected the master's name and the \
                     sentinels, as <master>,<host:port>,<host:port>"
                );
            };
            format!(
                "redis+sentinel://{}{sentinels}/{master}",
                auth.unwrap_or_default()
            )
        }
        ("tcp", other) => bail!("REDIS_TYPE={other:?}: expected single, cluster or sentinel"),
        (other, _) => bail!("REDIS_SOCKET_TYPE={other:?}: expected tcp or unix"),
    });
    Ok(out)
}

/// `?ca=…&cert=…&key=…` from `REDIS_TLS_CACERT`, `REDIS_TLS_CLIENT_CERT`, `REDIS_TLS_CLIENT_KEY`.
fn tls_query(vars: &Vars<'_>) -> anyhow::Result<String> {
    let mut query = Vec::new();
    if let Some(ca) = vars.get("REDIS_TLS_CACERT") {
        query.push(format!("ca={}", encode(&ca)));
    }
    match (
        vars.get("REDIS_TLS_CLIENT_CERT"),
        vars.get("REDIS_TLS_CLIENT_KEY"),
    ) {
        (Some(cert), Some(key)) => {
            query.push(format!("cert={}", encode(&cert)));
            query.push(format!("key={}", encode(&key)));
        }
        (None, None) => {}
        _ => {
            bail!("REDIS_TLS_CLIENT_CERT and REDIS_TLS_CLIENT_KEY go together: set both or neither")
        }
    }
    Ok(if query.is_empty() {
        String::new()
    } else {
        format!("?{}", query.join("&"))
    })
}

/// TLS files without `REDIS_TLS=true` would be ignored by ratelimit too; Weir says so.
fn no_tls_files(vars: &Vars<'_>) -> anyhow::Result<String> {
    for name in [
        "REDIS_TLS_CACERT",
        "REDIS_TLS_CLIENT_CERT",
        "REDIS_TLS_CLIENT_KEY",
    ] {
        if vars.get(name).is_some() {
            bail!("{name} is set but REDIS_TLS is not true: set REDIS_TLS=true to use it");
        }
    }
    Ok(String::new())
}

fn memcache(vars: &Vars<'_>) -> anyhow::Result<StoreChoice> {
    if vars.get("MEMCACHE_SRV").is_some() {
        bail!("MEMCACHE_SRV: Weir does not look memcached servers up by SRV record; list them in MEMCACHE_HOST_PORT (host:port,host:port)");
    }
    if vars.is_true("MEMCACHE_TLS")? {
        bail!("MEMCACHE_TLS=true: Weir speaks to memcached without TLS");
    }
    let Some(hosts) = vars.get("MEMCACHE_HOST_PORT") else {
        bail!("BACKEND_TYPE=memcache needs MEMCACHE_HOST_PORT (host:port,host:port)");
    };
    let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
    if hosts
        .iter()
        .any(|h| h.is_empty() || h.contains(['/', '@', '?']))
    {
        bail!("MEMCACHE_HOST_PORT: expected host:port,host:port");
    }
    Ok(StoreChoice {
        url: Some(format!("memcached://{}", hosts.join(","))),
        ..StoreChoice::default()
    })
}

/// Percent-encodes everything but unreserved characters and `/` (paths stay readable).
fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn store(pairs: &[(&str, &str)]) -> anyhow::Result<StoreChoice> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let lookup = move |name: &str| map.get(name).cloned();
        read(&Vars::new(&lookup))
    }

    fn url(pairs: &[(&str, &str)]) -> String {
        store(pairs).unwrap().url.unwrap()
    }

    #[test]
    fn every_redis_deployment_becomes_a_store_url() {
        assert_eq!(store(&[]).unwrap(), StoreChoice::default());
        assert_eq!(
            url(&[("REDIS_SOCKET_TYPE", "tcp"), ("REDIS_URL", "redis:6379")]),
            "redis://redis:6379"
        );
        assert_eq!(
            url(&[("REDIS_URL", "10.0.0.5:6379")]),
            "redis://10.0.0.5:6379"
        );
        assert_eq!(
            url(&[("BACKEND_TYPE", "redis")]),
            "unix:///var/run/nutcracker/ratelimit.sock"
        );
        assert_eq!(
            url(&[("REDIS_URL", "/run/redis.sock"), ("REDIS_AUTH", "app:p@ss")]),
            "unix:///run/redis.sock?user=app&pass=p%40ss"
        );
        assert_eq!(
            url(&[("REDIS_URL", "r:6379"), ("REDIS_AUTH", "s3cret")]),
            "redis://:s3cret@r:6379"
        );
        assert_eq!(
            url(&[("REDIS_TYPE", "CLUSTER"), ("REDIS_URL", "a:7000,b:7001")]),
            "redis+cluster://a:7000,b:7001"
        );
        assert_eq!(
            url(&[
                ("REDIS_TYPE", "sentinel"),
                ("REDIS_URL", "mymaster,s1:26379,s2:26379"),
                ("REDIS_AUTH", "pw")
            ]),
            "redis+sentinel://:pw@s1:26379,s2:26379/mymaster"
        );
        assert_eq!(
            url(&[
                ("REDIS_URL", "r:6380"),
                ("REDIS_TLS", "true"),
                ("REDIS_TLS_CACERT", "/etc/ca.pem"),
                ("REDIS_TLS_CLIENT_CERT", "/etc/c.pem"),
                ("REDIS_TLS_CLIENT_KEY", "/etc/k.pem")
            ]),
            "rediss://r:6380?ca=/etc/ca.pem&cert=/etc/c.pem&key=/etc/k.pem"
        );
        assert_eq!(
            url(&[("REDIS_URL", "redis://x:1/2"), ("REDIS_TYPE", "single")]),
            "redis://x:1/2"
        );
        let timed = store(&[
            ("REDIS_URL", "r:1"),
            ("REDIS_TIMEOUT", "250ms"),
            ("REDIS_PIPELINE_WINDOW", "300us"),
        ])
        .unwrap();
        assert_eq!(timed.timeout, Some(Duration::from_millis(250)));
        assert_eq!(timed.batch_wait, Some(Duration::from_micros(300)));
        let unbuffered = store(&[("REDIS_URL", "r:1"), ("REDIS_PIPELINE_WINDOW", "0")]).unwrap();
        assert_eq!(unbuffered.batch_wait, None);
    }

    #[test]
    fn what_weir_cannot_do_safely_is_an_error_naming_the_variable() {
        let err = |pairs: &[(&str, &str)]| store(pairs).unwrap_err().to_string();
        assert!(err(&[
            ("REDIS_TYPE", "cluster"),
            ("REDIS_URL", "a:1"),
            ("REDIS_TLS", "true")
        ])
        .starts_with("REDIS_TLS=true with REDIS_TYPE=cluster"));
        assert!(err(&[("REDIS_TYPE", "sentinel"), ("REDIS_URL", "a:1")])
            .starts_with("REDIS_URL with REDIS_TYPE=sentinel"));
        assert!(err(&[("REDIS_URL", "a:1"), ("REDIS_TLS_CACERT", "/ca")])
            .starts_with("REDIS_TLS_CACERT is set but REDIS_TLS is not true"));
        assert!(err(&[("BACKEND_TYPE", "dynamodb")]).starts_with("BACKEND_TYPE=\"dynamodb\""));
        assert!(err(&[("BACKEND_TYPE", "memcache")]).contains("needs MEMCACHE_HOST_PORT"));
        assert!(
            err(&[("MEMCACHE_HOST_PORT", "a:1"), ("MEMCACHE_TLS", "true")])
                .starts_with("MEMCACHE_TLS=true")
        );
        let secret = err(&[
            ("REDIS_URL", "a:1"),
            ("REDIS_TYPE", "ring"),
            ("REDIS_AUTH", "hunter2"),
        ]);
        assert!(!secret.contains("hunter2"), "{secret}");
    }

    #[test]
    fn several_memcached_servers_are_one_url() {
        assert_eq!(
            url(&[("MEMCACHE_HOST_PORT", "m1:11211, m2:11211")]),
            "memcached://m1:11211,m2:11211"
        );
        assert_eq!(
            url(&[
                ("BACKEND_TYPE", "memcache"),
                ("MEMCACHE_HOST_PORT", "m:11211"),
                ("REDIS_URL", "r:1")
            ]),
            "memcached://m:11211"
        );
    }
}
