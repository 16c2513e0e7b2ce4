//! Deployment URLs: which Redis a store talks to, parsed once when the store is built.
//!
//! - `redis://[user:password@]host:port[/db]`: one node;
//! - `rediss://…` the same over TLS (options and files: `tls.rs`);
//! - `unix:///path/redis.sock[?db=N&user=U&pass=P]` (also `redis+unix://`): one node on a
//!   Unix socket;
//! - `redis+cluster://[user:password@]host:port,host:port,...`: a Cluster, from any seed nodes;
//! - `redis+sentinel://[user:password@]host:port,host:port,.../master_name[/db]`: the master
//!   Sentinel names (the credentials are the data nodes'; sentinels are asked without them).
//!
//! Any password (a socket's `pass=` too) is kept out of every message: `Redactor` scrubs
//! it from errors, and the query string is never printed.

use redis::sentinel::{SentinelClientBuilder, SentinelServerType};
use redis::ConnectionAddr;

use crate::error::BuildError;
use crate::redact::{decode, Redactor};
use crate::shards::Access;
use crate::tls::{self, TlsFiles};

/// Where the store's records live.
pub(crate) enum Target {
    /// One node (the URL redis-rs parses: `redis://`, `rediss://`, `unix://`).
    Node(Box<redis::Client>),
    /// The master behind Sentinel.
    Sentinel(Box<tokio::sync::Mutex<redis::sentinel::SentinelClient>>),
    /// A Cluster, and how to reach its nodes one by one (`shards.rs`).
    Cluster(Box<redis::cluster::ClusterClient>, Box<Access>),
}

/// Credentials from a URL's user info.
#[derive(Default)]
struct Credentials {
    username: Option<String>,
    password: Option<String>,
    /// The password as written in the URL (percent-encoded).
    raw_password: Option<String>,
}

/// Splits `user:password@rest` into credentials and the rest.
fn credentials(authority_and_path: &str) -> (Credentials, &str) {
    let authority_end = authority_and_path
        .find('/')
        .unwrap_or(authority_and_path.len());
    match authority_and_path
        .get(..authority_end)
        .and_then(|a| a.rfind('@'))
    {
        Some(at) => {
            let info = authority_and_path.get(..at).unwrap_or_default();
            let rest = authority_and_path.get(at + 1..).unwrap_or_default();
            let (user, password) = match info.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (info, None),
            };
            let creds = Credentials {
                username: (!user.is_empty()).then(|| decode(user)),
                password: password.map(decode),
                raw_password: password.map(str::to_owned),
            };
            (creds, rest)
        }
        None => (Credentials::default(), authority_and_path),
    }
}

/// `host:port` pairs separated by commas.
fn hosts(list: &str, redacted: &str) -> Result<Vec<(String, u16)>, BuildError> {
    list.split(',')
        .map(|hp| {
            let (host, port) = hp.rsplit_once(':').unwrap_or((hp, "6379"));
            let port = port.parse::<u16>().map_err(|_| BuildError::Url {
                url: redacted.to_owned(),
                reason: format!("bad port in {hp:?}"),
            })?;
            if host.is_empty() {
                return Err(BuildError::Url {
                    url: redacted.to_owned(),
                    reason: "a host is empty".to_owned(),
                });
            }
            Ok((
                host.trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
                port,
            ))
        })
        .collect()
}

/// The URL with its password replaced, for messages.
fn redact_url(url: &str) -> String {
    // A query string may carry options, and some clients accept secrets there: drop it.
    let url = url.split_once('?').map_or(url, |(u, _)| u);
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest.get(..authority_end).and_then(|a| a.rfind('@')) {
        Some(at) => {
            let info = rest.get(..at).unwrap_or_default();
            let user = info.split_once(':').map_or(info, |(u, _)| u);
            format!(
                "{scheme}://{user}:***@{}",
                rest.get(at + 1..).unwrap_or_default()
            )
        }
        None => url.to_owned(),
    }
}

/// A socket URL's `pass=` query value, as written and decoded.
fn query_password(url: &str) -> [Option<String>; 2] {
    let query = url.split_once('?').map_or("", |(_, q)| q);
    let query = query.split_once('#').map_or(query, |(q, _)| q);
    let raw = query
        .split('&')
        .find_map(|pair| pair.strip_prefix("pass="))
        .map(str::to_owned);
    [raw.as_deref().map(decode), raw]
}

/// Parses a deployment URL; `tls_files` are the builder's (the URL may name them too).
pub(crate) fn parse(
    url: &str,
    connect_timeout: std::time::Duration,
    tls_files: &TlsFiles,
) -> Result<(Target, Redactor), BuildError> {
    let redacted = redact_url(url);
    let bad = |reason: &str| BuildError::Url {
        url: redacted.clone(),
        reason: reason.to_owned(),
    };
    let (url, url_files) = tls::split_options(url);
    let url = url.as_str();
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(bad("expected scheme://..."));
    };
    let (creds, rest) = credentials(rest);
    let redactor = Redactor {
        secrets: [creds.password.clone(), creds.raw_password.clone()]
            .into_iter()
            .chain(query_password(url))
            .flatten()
            .collect(),
        label: redacted.clone(),
    };
    let tls_files = tls::merge(tls_files, url_files, &redacted)?;
    if scheme != "rediss" {
        tls::refuse_without_tls(&tls_files, &redacted)?;
    }
    let redis_err = |e: redis::RedisError| BuildError::Url {
        url: redacted.clone(),
        reason: redactor.scrub(&e.to_string()),
    };
    let target = match scheme {
        "redis" | "redis+unix" | "unix" => {
            Target::Node(Box::new(redis::Client::open(url).map_err(redis_err)?))
        }
        "rediss" => Target::Node(Box::new(tls::client(url, &tls_files, &redacted, |m| {
            redactor.scrub(m)
        })?)),
        "redis+cluster" => {
            let (list, _) = rest.split_once('/').unwrap_or((rest, ""));
            let seeds = hosts(list, &redacted)?;
            let nodes: Vec<String> = seeds
                .iter()
                .map(|(h, p)| format!("redis://{h}:{p}"))
                .collect();
            let mut builder = redis::cluster::ClusterClient::builder(nodes)
                .connection_timeout(connect_timeout)
                .response_timeout(connect_timeout);
            if let Some(u) = &creds.username {
                builder = builder.username(u);
            }
            if let Some(p) = &creds.password {
                builder = builder.password(p);
            }
            let access = Access {
                seeds,
                username: creds.username.clone(),
                password: creds.password.clone(),
            };
            Target::Cluster(Box::new(builder.build().map_err(redis_err)?), Box::new(access))
        }
        "redis+sentinel" => {
            let Some((list, path)) = rest.split_once('/') else {
                return Err(bad("expected redis+sentinel://host:port,.../master_name"));
            };
            let (master, db) = path.split_once('/').unwrap_or((path, ""));
            if master.is_empty() {
                return Err(bad("the master name is missing"));
            }
            let sentinels = hosts(list, &redacted)?
                .into_iter()
                .map(|(h, p)| ConnectionAddr::Tcp(h, p));
            let mut builder =
                SentinelClientBuilder::new(sentinels, master, SentinelServerType::Master)
                    .map_err(redis_err)?;
            if let Some(u) = &creds.username {
                builder = builder.set_client_to_redis_username(u);
            }
            if let Some(p) = &creds.password {
                builder = builder.set_client_to_redis_password(p);
            }
            if !db.is_empty() {
                let db = db.parse::<i64>().map_err(|_| bad("bad database number"))?;
                builder = builder.set_client_to_redis_db(db);
            }
            Target::Sentinel(Box::new(tokio::sync::Mutex::new(
                builder.build().map_err(redis_err)?,
            )))
        }
        _ => {
            return Err(bad(
                "unknown scheme (expected redis, rediss, unix, redis+unix, redis+cluster or redis+sentinel)",
            ))
        }
    };
    Ok((target, redactor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn open(url: &str) -> Result<(Target, Redactor), BuildError> {
        parse(url, Duration::from_millis(50), &TlsFiles::default())
    }

    fn err(url: &str) -> String {
        match open(url) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{url} parsed"),
        }
    }

    #[test]
    fn every_deployment_parses() {
        for node in [
            "redis://127.0.0.1:6379",
            "rediss://redis.example:6380/1",
            "unix:///run/redis/redis.sock?db=2",
            "redis+unix:///run/redis/redis.sock",
        ] {
            assert!(matches!(open(node), Ok((Target::Node(_), _))), "{node}");
        }
        assert!(matches!(
            open("redis+cluster://a:1,b:2,c:3"),
            Ok((Target::Cluster(..), _))
        ));
        assert!(matches!(
            open("redis+sentinel://:s3cret@a:26379,b:26379/mymaster"),
            Ok((Target::Sentinel(_), _))
        ));
    }

    #[test]
    fn tls_options_are_checked_when_the_store_is_built() {
        assert_eq!(
            err("redis://h:1?ca=/etc/ca.pem"),
            "redis://h:1: TLS options (ca, cert, key) need a rediss:// URL"
        );
        let files = TlsFiles {
            ca: Some("/etc/ca.pem".into()),
            ..TlsFiles::default()
        };
        let msg = match parse("unix:///r.sock", Duration::from_millis(50), &files) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("parsed"),
        };
        assert!(msg.ends_with("need a rediss:// URL"), "{msg}");
        let msg = err("rediss://h:1?ca=/nonexistent/weir-ca.pem");
        assert!(
            msg.starts_with("rediss://h:1: cannot read the CA file /nonexistent/weir-ca.pem: "),
            "{msg}"
        );
        assert_eq!(
            err("rediss://h:1?cert=/c.pem"),
            "rediss://h:1: a client certificate needs both cert and key (tls_client_cert)"
        );
        let msg = err("rediss://h:1/#insecure");
        assert!(msg.contains("#insecure) is not supported"), "{msg}");
    }

    #[test]
    fn a_password_never_reaches_a_message() {
        let msg = err("redis+sentinel://alice:s3cr%2Ft@h:1");
        assert!(!msg.contains("s3cr"), "{msg}");
        assert!(msg.contains("alice:***@"), "{msg}");
        let msg = err("rediss://:hunter2@h:1?ca=/nonexistent/ca.pem");
        assert!(!msg.contains("hunter2"), "{msg}");
        let msg = err("redis+cluster://:hunter2@h:x");
        assert!(!msg.contains("hunter2"), "{msg}");
        let (_, redactor) = open("redis://:p%40ss@h:1").unwrap();
        assert_eq!(
            redactor.scrub("auth p@ss failed (p%40ss)"),
            "auth *** failed (***)"
        );
        let (_, redactor) = open("unix:///r.sock?user=app&pass=s%21cret").unwrap();
        assert_eq!(redactor.label, "unix:///r.sock");
        assert_eq!(redactor.scrub("s!cret s%21cret"), "*** ***");
    }
}
