//! The two text formats `/metrics` serves, and which one a scraper gets: [`Exposition`].
//! The registry renders OpenMetrics; the Prometheus text format (0.0.4) is derived from it
//! here, line by line, so both formats always hold the same series.
//!
//! **Which one, and why.** OpenMetrics requires a counter's samples to end in `_total`, so
//! envoyproxy/ratelimit's counters (`ratelimit_service_rate_limit_total_hits`, …, named
//! without it by its statsd-exporter mapping) would be renamed and its dashboards would go
//! blank. ratelimit's own `/metrics` (client_golang's `promhttp.Handler`, OpenMetrics not
//! enabled) always answers in the Prometheus text format, where a counter keeps its name.
//! A default Prometheus scrape asks for OpenMetrics first but accepts that format too
//! (`application/openmetrics-text;version=1.0.0,…,text/plain;version=0.0.4;q=0.5,*/*;q=0.1`),
//! so Weir answers as ratelimit does: the Prometheus text format to every client that
//! accepts it (no `Accept`, `*/*`, `text/*`, `text/plain`, at any weight), OpenMetrics only
//! to one that asks for `application/openmetrics-text` and does not accept the other.
//! Weir's own series read the same in both (`weir_decisions_total{…}`).

use std::fmt::Write as _;

/// A text format of `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Exposition {
    /// The Prometheus text format 0.0.4: what a client gets unless it accepts only
    /// OpenMetrics. Counters keep their names (envoyproxy/ratelimit's have no `_total`).
    Prometheus,
    /// OpenMetrics 1.0.0 text: every counter's samples end in `_total`, and `# EOF`.
    OpenMetrics,
}

impl Exposition {
    /// The format for a request's `Accept` header (see the module header).
    ///
    /// ```
    /// use weir_engine::Exposition;
    ///
    /// let prometheus = "application/openmetrics-text;version=1.0.0,\
    ///     application/openmetrics-text;version=0.0.1;q=0.75,\
    ///     text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    /// assert_eq!(Exposition::negotiate(Some(prometheus)), Exposition::Prometheus);
    /// assert_eq!(Exposition::negotiate(None), Exposition::Prometheus);
    /// assert_eq!(
    ///     Exposition::negotiate(Some("application/openmetrics-text; version=1.0.0")),
    ///     Exposition::OpenMetrics
    /// );
    /// ```
    pub fn negotiate(accept: Option<&str>) -> Exposition {
        let Some(accept) = accept else {
            return Exposition::Prometheus;
        };
        let mut openmetrics = false;
        let mut text = false;
        for range in accept.split(',') {
            let mut params = range.split(';').map(str::trim);
            let media = params.next().unwrap_or_default().to_ascii_lowercase();
            let refused = params.any(|p| {
                p.split_once('=').is_some_and(|(k, v)| {
                    k.trim().eq_ignore_ascii_case("q") && v.trim().parse::<f64>() == Ok(0.0)
                })
            });
            if refused {
                continue;
            }
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = true,
                "text/plain" | "text/*" | "*/*" => text = true,
                _ => {}
            }
        }
        if openmetrics && !text {
            Exposition::OpenMetrics
        } else {
            Exposition::Prometheus
        }
    }

    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Exposition::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Exposition::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// OpenMetrics text as the Prometheus text format: no `# EOF`, `# UNIT` or `_created`,
/// no exemplars; a counter's `# HELP` / `# TYPE` name its samples (`x_total`), except the
/// families of `bare` (named as they are, their samples' `_total` taken off); `info` is a
/// gauge named `x_info`, `unknown` is `untyped`.
pub(crate) fn to_prometheus(openmetrics: &str, bare: &[&str]) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // The family being copied: its OpenMetrics name and type.
    let mut family = (String::new(), String::new());
    let mut help: Option<&str> = None;
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            help = Some(rest);
            continue;
        }
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, "unknown"));
            family = (name.to_string(), kind.to_string());
            let (exposed, kind) = match kind {
                "counter" if bare.contains(&name) => (name.to_string(), "counter"),
                "counter" => (format!("{name}_total"), "counter"),
                "info" => (format!("{name}_info"), "gauge"),
                "gauge" | "histogram" | "summary" => (name.to_string(), kind),
                _ => (name.to_string(), "untyped"),
            };
            if let Some(help) = help.take() {
                let text = help.split_once(' ').map_or("", |(_, text)| text);
                let _ = writeln!(out, "# HELP {exposed} {}", text.replace("\\\"", "\""));
            }
            let _ = writeln!(out, "# TYPE {exposed} {kind}");
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let sample = without_exemplar(line);
        let (name, rest) = sample.split_at(sample.find(['{', ' ']).unwrap_or(sample.len()));
        let (family_name, kind) = (&family.0, family.1.as_str());
        if name.ends_with("_created") && matches!(kind, "counter" | "histogram" | "summary") {
            continue;
        }
        if kind == "counter" && bare.contains(&family_name.as_str()) {
            if let Some(base) = name.strip_suffix("_total") {
                let _ = writeln!(out, "{base}{rest}");
                continue;
            }
        }
        let _ = writeln!(out, "{name}{rest}");
    }
    out
}

/// A sample line without its exemplar (` # {…} value`), label values read with their
/// escapes so a `#` inside one is kept.
fn without_exemplar(line: &str) -> &str {
    let mut in_value = false;
    let mut escaped = false;
    let mut labels_done = !line.contains('{');
    for (i, c) in line.char_indices() {
        if in_value {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_value = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' if !labels_done => in_value = true,
            '}' if !labels_done => labels_done = true,
            '#' if labels_done => return line.get(..i).unwrap_or(line).trim_end(),
            _ => {}
        }
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPENMETRICS: &str = "\
# HELP weir_decisions Decisions.
# TYPE weir_decisions counter
weir_decisions_total{domain=\"a # b\",outcome=\"x\"} 3
weir_decisions_created{domain=\"a # b\",outcome=\"x\"} 1.5
# HELP ratelimit_service_rate_limit_total_hits Hits \\\"quoted\\\".
# TYPE ratelimit_service_rate_limit_total_hits counter
ratelimit_service_rate_limit_total_hits_total{domain=\"rl\",key1=\"k\",key2=\"\"} 5 # {trace=\"t\"} 1.0
# HELP weir_store_duration_seconds Time.
# TYPE weir_store_duration_seconds histogram
# UNIT weir_store_duration_seconds seconds
weir_store_duration_seconds_sum 0.5
weir_store_duration_seconds_count 2
weir_store_duration_seconds_bucket{le=\"+Inf\"} 2
# HELP weir_build Build.
# TYPE weir_build info
weir_build_info{version=\"1\"} 1
# HELP weir_keys Keys.
# TYPE weir_keys gauge
weir_keys 7
# EOF
";

    #[test]
    fn openmetrics_becomes_prometheus_text_with_upstream_counters_keeping_their_names() {
        let text = to_prometheus(OPENMETRICS, &["ratelimit_service_rate_limit_total_hits"]);
        assert_eq!(
            text,
            "\
# HELP weir_decisions_total Decisions.
# TYPE weir_decisions_total counter
weir_decisions_total{domain=\"a # b\",outcome=\"x\"} 3
# HELP ratelimit_service_rate_limit_total_hits Hits \"quoted\".
# TYPE ratelimit_service_rate_limit_total_hits counter
ratelimit_service_rate_limit_total_hits{domain=\"rl\",key1=\"k\",key2=\"\"} 5
# HELP weir_store_duration_seconds Time.
# TYPE weir_store_duration_seconds histogram
weir_store_duration_seconds_sum 0.5
weir_store_duration_seconds_count 2
weir_store_duration_seconds_bucket{le=\"+Inf\"} 2
# HELP weir_build_info Build.
# TYPE weir_build_info gauge
weir_build_info{version=\"1\"} 1
# HELP weir_keys Keys.
# TYPE weir_keys gauge
weir_keys 7
"
        );
    }

    #[test]
    fn openmetrics_only_for_a_client_that_does_not_accept_the_text_format() {
        let om = Exposition::OpenMetrics;
        let text = Exposition::Prometheus;
        for (accept, expected) in [
            (None, text),
            (Some(""), text),
            (Some("*/*"), text),
            (Some("text/plain"), text),
            (Some("text/plain;version=0.0.4"), text),
            (Some("application/json"), text),
            // Prometheus 2.x's default scrape, and 3.x's.
            (Some("application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"), text),
            (Some("application/openmetrics-text;version=1.0.0;escaping=allow-utf-8,application/openmetrics-text;version=0.0.1;q=0.9,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.8,text/plain;version=0.0.4;q=0.7,*/*;q=0.6"), text),
            (Some("application/openmetrics-text"), om),
            (Some("Application/OpenMetrics-Text; version=1.0.0"), om),
            (Some("application/openmetrics-text, text/plain;q=0"), om),
            (Some("application/openmetrics-text;q=0, text/plain"), text),
        ] {
            assert_eq!(Exposition::negotiate(accept), expected, "{accept:?}");
        }
    }
}
