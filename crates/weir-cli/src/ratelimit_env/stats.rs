//! envoyproxy/ratelimit's statsd variables as Weir's statsd output: `USE_STATSD` (ratelimit's
//! default is true, so it is on whenever ratelimit's variables are in use and it is not set
//! false), `STATSD_HOST` (default `localhost`), `STATSD_PORT` (8125), `STATS_FLUSH_INTERVAL`
//! (10s), `EXTRA_TAGS` (`key:value,key:value`, as its settings library reads a map) and
//! `USE_DOG_STATSD`. The counters themselves: `weir-engine`'s `metrics/statsd.rs`.

use std::net::ToSocketAddrs as _;
use std::time::Duration;

use anyhow::{bail, Context as _};
use weir_engine::StatsdSettings;

use super::vars::Vars;

/// The statsd output ratelimit's variables ask for; `in_use`: some of ratelimit's
/// variables are set (its `USE_STATSD` default, true, applies then).
pub(crate) fn read(vars: &Vars<'_>, in_use: bool) -> anyhow::Result<Option<StatsdSettings>> {
    let dogstatsd = vars.is_true("USE_DOG_STATSD")?;
    let on = vars.bool("USE_STATSD")?.unwrap_or(in_use) || dogstatsd;
    let host = vars.get("STATSD_HOST");
    let port = vars.port("STATSD_PORT")?;
    let flush = vars.duration("STATS_FLUSH_INTERVAL")?;
    let tags = tags(vars)?;
    if !on {
        return Ok(None);
    }
    let host = host.unwrap_or_else(|| "localhost".to_string());
    let port = port.unwrap_or(8125);
    let addr = (host.as_str(), port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut addrs| addrs.next())
        .with_context(|| {
            format!("STATSD_HOST={host:?}: not an address or a host name that resolves")
        })?;
    let flush_interval = flush.unwrap_or(Duration::from_secs(10));
    if flush_interval.is_zero() {
        bail!("STATS_FLUSH_INTERVAL=0: the flush interval must be longer than zero");
    }
    Ok(Some(StatsdSettings {
        addr,
        flush_interval,
        tags,
        dogstatsd,
    }))
}

/// `EXTRA_TAGS`: `key:value` pairs separated by commas, keys in order.
fn tags(vars: &Vars<'_>) -> anyhow::Result<Vec<(String, String)>> {
    let Some(text) = vars.get("EXTRA_TAGS") else {
        return Ok(Vec::new());
    };
    let mut tags = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let Some((key, value)) = pair.split_once(':') else {
            bail!("EXTRA_TAGS={text:?}: {pair:?} is not key:value");
        };
        let bad = |s: &str| s.is_empty() || s.contains(['|', '#', '\n', '.', '=', ' ']);
        if bad(key.trim()) || value.trim().contains(['|', '#', '\n', ' ']) {
            bail!("EXTRA_TAGS={text:?}: {pair:?} holds a character statsd cannot carry");
        }
        tags.push((key.trim().to_string(), value.trim().to_string()));
    }
    tags.sort();
    Ok(tags)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_with(pairs: &[(&str, &str)], in_use: bool) -> anyhow::Result<Option<StatsdSettings>> {
        let lookup = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        read(&Vars::new(&lookup), in_use)
    }

    #[test]
    fn statsd_is_on_by_default_under_ratelimits_variables_as_upstream() {
        assert_eq!(read_with(&[], false).unwrap(), None);
        let on = read_with(&[], true).unwrap().unwrap();
        assert_eq!(on.addr.port(), 8125);
        assert!(on.addr.ip().is_loopback());
        assert_eq!(on.flush_interval, Duration::from_secs(10));
        assert_eq!(read_with(&[("USE_STATSD", "false")], true).unwrap(), None);
        let set = read_with(
            &[
                ("STATSD_HOST", "127.0.0.1"),
                ("STATSD_PORT", "9125"),
                ("STATS_FLUSH_INTERVAL", "1s"),
                ("EXTRA_TAGS", "zone:b, app:rl"),
                ("USE_DOG_STATSD", "true"),
            ],
            true,
        )
        .unwrap()
        .unwrap();
        assert_eq!(set.addr.to_string(), "127.0.0.1:9125");
        assert_eq!(set.flush_interval, Duration::from_secs(1));
        assert_eq!(
            set.tags,
            [("app".into(), "rl".into()), ("zone".into(), "b".into())]
        );
        assert!(set.dogstatsd);
        let err = |pairs: &[(&str, &str)]| format!("{:#}", read_with(pairs, true).unwrap_err());
        assert!(err(&[("EXTRA_TAGS", "novalue")]).contains("not key:value"));
        assert!(err(&[("STATS_FLUSH_INTERVAL", "0")]).contains("longer than zero"));
        assert!(err(&[("STATSD_PORT", "x")]).starts_with("STATSD_PORT"));
    }
}
