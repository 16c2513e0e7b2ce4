//! envoyproxy/ratelimit's statsd output (`USE_STATSD`, its default): every flush interval,
//! each rule's hits since the last flush as statsd counters under ratelimit's names,
//! `ratelimit.service.rate_limit.<rule id>.<stat>` (the rule id is ratelimit's stats key,
//! `domain.key_value.key`; `:` and `|` replaced by `_` as its `SanitizeStatName`), and the
//! service's own (`service.rs`: `ratelimit_server.ShouldRateLimit.total_requests`, the
//! `response_time` timer in ms, `ratelimit.service.call.should_rate_limit.*_error`,
//! `ratelimit.service.global_shadow_mode`, `ratelimit.service.config_load_*`), sent over
//! UDP by the `cadence` client. ratelimit's `EXTRA_TAGS` are appended to each name as its
//! gostats library writes tags (`.__key=value`, keys in order), or, with DogStatsD
//! (`USE_DOG_STATSD`), sent as DogStatsD tags (`|#key:value`).
//!
//! The counts are the ones `/metrics` exports: `hits.rs` and `service.rs` count once and
//! keep the counts since the last flush beside their Prometheus counters. A flush reads
//! the rule snapshot in force; what a replaced snapshot counted after its last flush is
//! not sent. ratelimit sends one timing per call; Weir sends at most the latest
//! [`TIMINGS`](super::service::TIMINGS) of a flush interval, with statsd's sampling rate
//! (`|@0.25`) saying how many there were, so a statsd server counts them all.

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use cadence::prelude::*;
use cadence::{MetricBuilder, StatsdClient, UdpMetricSink};

use super::hits::STATS;
use super::{Metrics, RuleCounters};

/// Where and how statsd counters are sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatsdSettings {
    /// The statsd server (ratelimit's `STATSD_HOST` / `STATSD_PORT`).
    pub addr: SocketAddr,
    /// How often counts are sent (ratelimit's `STATS_FLUSH_INTERVAL`, default 10 s).
    pub flush_interval: Duration,
    /// Tags on every counter (ratelimit's `EXTRA_TAGS`), in order.
    pub tags: Vec<(String, String)>,
    /// DogStatsD tags (`|#k:v`) instead of tags in the name (ratelimit's `USE_DOG_STATSD`).
    pub dogstatsd: bool,
}

/// Why statsd cannot start.
#[derive(Debug, thiserror::Error)]
#[error("statsd to {addr}: {source}")]
pub struct StatsdError {
    addr: SocketAddr,
    #[source]
    source: std::io::Error,
}

/// A statsd client sending to `settings.addr` over UDP (never blocking a flush).
pub(crate) fn client(settings: &StatsdSettings) -> Result<StatsdClient, StatsdError> {
    let failed = |source| StatsdError {
        addr: settings.addr,
        source,
    };
    let bind: SocketAddr = if settings.addr.is_ipv4() {
        ([0, 0, 0, 0], 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let socket = UdpSocket::bind(bind).map_err(failed)?;
    socket.set_nonblocking(true).map_err(failed)?;
    let sink = UdpMetricSink::from(settings.addr, socket).map_err(|e| StatsdError {
        addr: settings.addr,
        source: std::io::Error::other(e.to_string()),
    })?;
    Ok(StatsdClient::from_sink("", sink))
}

/// Sends each rule's counts since the last flush (none for a rule without hits) and the
/// service's: the engine calls it every `flush_interval` with the rule snapshot in force.
pub(crate) fn flush(
    metrics: &Metrics,
    counters: &RuleCounters,
    client: &StatsdClient,
    settings: &StatsdSettings,
) {
    let mut failures = 0_u32;
    let mut send = |sent: bool| {
        if !sent {
            failures = failures.saturating_add(1);
        }
    };
    for (rule_id, hits) in &counters.hits {
        for (stat, count) in STATS.iter().zip(hits.take()) {
            if count == 0 {
                continue;
            }
            let name = stat_name(rule_id, stat, settings);
            send(
                with_tags(client.count_with_tags(&name, count), settings)
                    .try_send()
                    .is_ok(),
            );
        }
    }
    let service = metrics.service();
    for (stat, counter) in service.stats() {
        let count = counter.take();
        if count > 0 {
            let name = tagged(stat.to_string(), settings);
            send(
                with_tags(client.count_with_tags(&name, count), settings)
                    .try_send()
                    .is_ok(),
            );
        }
    }
    let (timings, rate) = service.response_times.take();
    let name = tagged(
        "ratelimit_server.ShouldRateLimit.response_time".to_string(),
        settings,
    );
    for ms in timings {
        let timer = with_tags(client.time_with_tags(&name, ms), settings);
        send(
            if rate < 1.0 {
                timer.with_sampling_rate(rate)
            } else {
                timer
            }
            .try_send()
            .is_ok(),
        );
    }
    if failures > 0 {
        tracing::debug!(failures, addr = %settings.addr, "statsd counters not sent");
    }
}

/// `metric` with `EXTRA_TAGS` as DogStatsD tags, under DogStatsD.
fn with_tags<'m, 'c, T>(
    mut metric: MetricBuilder<'m, 'c, T>,
    settings: &'m StatsdSettings,
) -> MetricBuilder<'m, 'c, T>
where
    T: cadence::Metric + From<String>,
{
    if settings.dogstatsd {
        for (key, value) in &settings.tags {
            metric = metric.with_tag(key, value);
        }
    }
    metric
}

/// ratelimit's name of `stat` of `rule_id`, with `EXTRA_TAGS` in it unless DogStatsD.
fn stat_name(rule_id: &str, stat: &str, settings: &StatsdSettings) -> String {
    let name = format!(
        "ratelimit.service.rate_limit.{}.{stat}",
        rule_id.replace([':', '|'], "_")
    );
    tagged(name, settings)
}

/// `name` with `EXTRA_TAGS` appended as gostats writes them, unless DogStatsD.
fn tagged(mut name: String, settings: &StatsdSettings) -> String {
    if !settings.dogstatsd {
        for (key, value) in &settings.tags {
            name.push_str(&format!(".__{key}={value}"));
        }
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_ratelimits_with_tags_as_gostats_writes_them() {
        let mut settings = StatsdSettings {
            addr: ([127, 0, 0, 1], 8125).into(),
            flush_interval: Duration::from_secs(10),
            tags: vec![("a".into(), "1".into()), ("b".into(), "2".into())],
            dogstatsd: false,
        };
        assert_eq!(
            stat_name("rl.foo_bar:x|y", "total_hits", &settings),
            "ratelimit.service.rate_limit.rl.foo_bar_x_y.total_hits.__a=1.__b=2"
        );
        settings.dogstatsd = true;
        assert_eq!(
            stat_name("rl.k", "over_limit", &settings),
            "ratelimit.service.rate_limit.rl.k.over_limit"
        );
    }
}
