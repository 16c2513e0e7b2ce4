//! The server list of a store, as given (`host:port`, or a comma-separated list as
//! envoyproxy/ratelimit's `MEMCACHE_HOST_PORT`, optionally after `memcached://` or
//! `memcache://`), checked into distinct `host:port` names. Used by `builder.rs` only; the
//! names then label the servers on the ring (`ring.rs`).

use crate::error::ConfigError;

/// The `host:port` of every server in `given` (each an address or a list, after an
/// optional scheme), checked: at least one and at most `max`, each valid, none twice.
pub(crate) fn addresses(given: &[String], max: usize) -> Result<Vec<String>, ConfigError> {
    let mut addrs: Vec<String> = Vec::new();
    for entry in given {
        let list = entry.trim();
        let list = list
            .strip_prefix("memcached://")
            .or_else(|| list.strip_prefix("memcache://"))
            .unwrap_or(list)
            .trim_end_matches('/');
        for addr in list.split(',').map(str::trim) {
            let valid = addr.rsplit_once(':').is_some_and(|(host, port)| {
                !host.is_empty()
                    && !host.contains(|c: char| c.is_whitespace() || c == '/')
                    && port.parse::<u16>().is_ok()
            });
            if !valid {
                let addr = if addr.is_empty() { entry } else { addr };
                return Err(ConfigError::Address {
                    addr: addr.to_owned(),
                });
            }
            if addrs.iter().any(|a| a.eq_ignore_ascii_case(addr)) {
                return Err(ConfigError::DuplicateServer {
                    addr: addr.to_owned(),
                });
            }
            addrs.push(addr.to_owned());
        }
    }
    if addrs.is_empty() {
        return Err(ConfigError::NoServers);
    }
    if addrs.len() > max {
        return Err(ConfigError::too_large("servers", addrs.len(), max));
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_lists_are_parsed_like_memcache_host_port() {
        let ok = |given: &[&str]| {
            addresses(
                &given.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>(),
                256,
            )
        };
        assert_eq!(
            ok(&["memcache://h1:11211,h2:11212/"]).unwrap(),
            ["h1:11211", "h2:11212"]
        );
        assert_eq!(
            ok(&["memcached://h1:1, h2:2", "[::1]:3"]).unwrap(),
            ["h1:1", "h2:2", "[::1]:3"]
        );
        assert_eq!(ok(&[]), Err(ConfigError::NoServers));
        assert_eq!(
            ok(&["memcache://"]),
            Err(ConfigError::Address {
                addr: "memcache://".into()
            })
        );
        assert_eq!(
            ok(&["h1:1,,h2:2"]),
            Err(ConfigError::Address {
                addr: "h1:1,,h2:2".into()
            })
        );
        assert_eq!(
            ok(&["h1:1,h2:99999"]),
            Err(ConfigError::Address {
                addr: "h2:99999".into()
            })
        );
        assert_eq!(
            ok(&["redis://h:1"]),
            Err(ConfigError::Address {
                addr: "redis://h:1".into()
            })
        );
        let many: Vec<String> = (0..300).map(|i| format!("h{i}:1")).collect();
        assert_eq!(
            addresses(&many, 256).unwrap_err().to_string(),
            "servers is 300, above the maximum of 256"
        );
    }
}
