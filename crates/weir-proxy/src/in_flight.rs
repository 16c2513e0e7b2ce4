//! The proxy's side of the in-flight limit (the gate itself is `weir-tower`'s): each
//! request's priority from its class, and the limit's figures on `/metrics` and as the
//! dashboard's `in_flight` panel. The priority
//! is read when a request the rate limits allowed reaches the gate, just before it would
//! be forwarded.

use std::collections::HashMap;
use std::fmt::Write as _;

use http::request::Parts;
use serde_json::{json, Value};
use weir_tower::RateLimitLayer;

use crate::classify::{classify, Class};
use crate::settings::DEFAULT_PRIORITY;

/// A request's priority: its class's, else [`DEFAULT_PRIORITY`].
pub(crate) fn priority_of(
    classes: &[Class],
    priorities: &HashMap<String, u8>,
    parts: &Parts,
) -> u8 {
    priorities
        .get(classify(classes, parts))
        .copied()
        .unwrap_or(DEFAULT_PRIORITY)
}

/// The in-flight limit's series, OpenMetrics text: the limit, requests inside and
/// waiting, the adaptive limit's measured latencies, and requests admitted and shed by
/// priority (a label of at most 256 values, set by the operator, never by a client).
pub(crate) fn in_flight_metrics(layer: &RateLimitLayer, out: &mut String) {
    let Some(stats) = layer.in_flight_stats() else {
        return;
    };
    let mut gauge = |name: &str, help: &str, value: String| {
        let _ = write!(
            out,
            "# HELP {name} {help}.\n# TYPE {name} gauge\n{name} {value}\n"
        );
    };
    gauge(
        "weir_proxy_in_flight_limit",
        "The in-flight limit towards the upstream in force (fixed, or the adaptive limit's current value)",
        stats.limit.to_string(),
    );
    gauge(
        "weir_proxy_in_flight",
        "Requests inside the upstream now",
        stats.in_flight.to_string(),
    );
    gauge(
        "weir_proxy_in_flight_queued",
        "Requests waiting for an in-flight slot now",
        stats.queued.to_string(),
    );
    if let Some(min_rtt) = stats.min_rtt {
        gauge(
            "weir_proxy_min_rtt_seconds",
            "The adaptive limit's measured unloaded latency of the upstream",
            format!("{:.6}", min_rtt.as_secs_f64()),
        );
        gauge(
            "weir_proxy_min_rtt_measuring",
            "1 while the adaptive limit measures the unloaded latency (the limit is its minimum concurrency)",
            u8::from(stats.measuring).to_string(),
        );
    }
    if let Some(sample_rtt) = stats.sample_rtt {
        gauge(
            "weir_proxy_sample_rtt_seconds",
            "The adaptive limit's latest sampled latency of the upstream (a window's percentile)",
            format!("{:.6}", sample_rtt.as_secs_f64()),
        );
    }
    let mut counter = |name: &str, help: &str, values: &[(u8, u64)]| {
        let _ = write!(out, "# HELP {name} {help}.\n# TYPE {name} counter\n");
        for (priority, count) in values {
            let _ = writeln!(out, "{name}_total{{priority=\"{priority}\"}} {count}");
        }
    };
    counter(
        "weir_proxy_in_flight_admitted",
        "Requests let into the upstream by the in-flight limit, by priority",
        &stats.admitted,
    );
    counter(
        "weir_proxy_in_flight_shed",
        "Requests shed by the in-flight limit (line full, pushed out by a higher priority, or waited too long), by priority",
        &stats.shed,
    );
}

/// The dashboard's `in_flight` panel: the limit now and whether it is `fixed` or
/// `adaptive`, requests inside and waiting, the adaptive limit's measured latencies in
/// milliseconds (`null` until measured, and always with a fixed limit), and requests
/// admitted and shed by priority. Every value is a number or one of two words: nothing a
/// client chose. `null` without an in-flight limit.
pub(crate) fn in_flight_panel(layer: &RateLimitLayer, adaptive: bool) -> Value {
    let Some(stats) = layer.in_flight_stats() else {
        return Value::Null;
    };
    let ms = |d: Option<std::time::Duration>| d.map(|d| d.as_secs_f64() * 1000.0);
    let by_priority = |counts: &[(u8, u64)]| {
        counts
            .iter()
            .map(|(priority, count)| json!({ "priority": priority, "count": count }))
            .collect::<Vec<_>>()
    };
    json!({
        "mode": if adaptive { "adaptive" } else { "fixed" },
        "limit": stats.limit,
        "in_flight": stats.in_flight,
        "queued": stats.queued,
        "min_rtt_ms": ms(stats.min_rtt),
        "sample_rtt_ms": ms(stats.sample_rtt),
        "measuring": stats.measuring,
        "admitted": by_priority(&stats.admitted),
        "shed": by_priority(&stats.shed),
    })
}
