//! Text renderings of a simulation [`Report`]: an aligned table for people, CSV and JSON for
//! tools. Formatting only; the numbers come from `simulate.rs`, the chart from `svg.rs`.

use std::fmt::Write as _;

use crate::duration::{decimal, format_approx, format_duration, format_secs};
use crate::simulate::{Report, Row, Tally, START_NS};

/// `0s-1s`, `500ms-1s`: an interval's span, for the table and the chart's tooltips.
pub(crate) fn span(row: &Row) -> String {
    format!(
        "{}-{}",
        format_duration(row.start_ns),
        format_duration(row.end_ns)
    )
}

/// Nanoseconds as decimal milliseconds: `450`, `12.5`.
fn millis(ns: u64) -> String {
    decimal(ns, 1_000_000)
}

/// The table: a header naming the rules, one row per interval with `allowed/denied` per rule
/// (plus `~mean delay` for a leaky queue), and a total row.
pub(crate) fn table(report: &Report) -> String {
    let mut out = String::new();
    let rules = report.rules.len();
    let _ = writeln!(
        out,
        "{} {}: {}",
        rules,
        if rules == 1 { "rule" } else { "rules" },
        report.summary()
    );
    let _ = writeln!(out, "cells are allowed/denied requests per interval");
    if report.rules.iter().any(|r| r.delays()) {
        let _ = writeln!(
            out,
            "(leaky_queue: ~ the mean delay an allowed request waits before it goes)"
        );
    }
    out.push('\n');
    for (i, spec) in report.rules.iter().enumerate() {
        let _ = writeln!(out, "  [{}] {}", i + 1, spec.text);
    }
    out.push('\n');

    let all_rows: Vec<&Row> = report.rows.iter().chain([&report.total]).collect();
    let mut columns: Vec<Vec<String>> = vec![
        std::iter::once("interval".to_owned())
            .chain(report.rows.iter().map(span))
            .chain(["total".to_owned()])
            .collect(),
        std::iter::once("sent".to_owned())
            .chain(all_rows.iter().map(|r| r.sent.to_string()))
            .collect(),
    ];
    for (i, spec) in report.rules.iter().enumerate() {
        let tallies: Vec<&Tally> = all_rows.iter().filter_map(|r| r.tallies.get(i)).collect();
        let width = |f: fn(&Tally) -> u64| {
            tallies
                .iter()
                .map(|t| f(t).to_string().len())
                .max()
                .unwrap_or(1)
        };
        let (aw, dw) = (width(|t| t.allowed), width(|t| t.denied));
        let header = format!("[{}] {}", i + 1, spec.algorithm());
        let cells = tallies.iter().map(|t| {
            let mut cell = format!("{:>aw$}/{:<dw$}", t.allowed, t.denied);
            if spec.delays() {
                if let Some(ns) = t.mean_delay_ns() {
                    let _ = write!(cell, " ~{}", format_approx(ns));
                }
            }
            cell
        });
        columns.push(std::iter::once(header).chain(cells).collect());
    }

    let widths: Vec<usize> = columns
        .iter()
        .map(|c| c.iter().map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let lines = all_rows.len() + 1;
    for line in 0..lines {
        if line == lines - 1 {
            let rule_width = widths.iter().sum::<usize>() + 2 * (widths.len() - 1);
            let _ = writeln!(out, "{}", "-".repeat(rule_width));
        }
        let mut text = String::new();
        for (c, (column, width)) in columns.iter().zip(&widths).enumerate() {
            let cell = column.get(line).map_or("", String::as_str);
            match c {
                0 => {
                    let _ = write!(text, "{cell:<width$}");
                }
                1 => {
                    let _ = write!(text, "  {cell:>width$}");
                }
                _ => {
                    let _ = write!(text, "  {cell:<width$}");
                }
            }
        }
        let _ = writeln!(out, "{}", text.trim_end());
    }
    out
}

/// CSV, one line per interval and rule, then one `total` line per rule. Times are seconds
/// from the start; `mean_delay_ms` is only filled for a leaky queue.
pub(crate) fn csv(report: &Report) -> String {
    let mut out =
        String::from("interval,start_s,end_s,rule,algorithm,sent,allowed,denied,mean_delay_ms\n");
    let labelled = report
        .rows
        .iter()
        .enumerate()
        .map(|(i, row)| (i.to_string(), row))
        .chain([("total".to_owned(), &report.total)]);
    for (label, row) in labelled {
        for (spec, tally) in report.rules.iter().zip(&row.tallies) {
            let delay = match (spec.delays(), tally.mean_delay_ns()) {
                (true, Some(ns)) => millis(ns),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "{label},{},{},{},{},{},{},{},{delay}",
                format_secs(row.start_ns),
                format_secs(row.end_ns),
                csv_field(&spec.text),
                spec.algorithm(),
                row.sent,
                tally.allowed,
                tally.denied,
            );
        }
    }
    out
}

/// Quotes a CSV field when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_owned()
    }
}

/// JSON: the rules, then `intervals` and `total`, each with one result per rule in rule
/// order. Times are seconds from the start (`start_unix_ns` is the start's absolute time).
pub(crate) fn json(report: &Report) -> String {
    let mut out = String::from("{\n");
    let _ = writeln!(out, "  \"start_unix_ns\": {START_NS},");
    let _ = writeln!(
        out,
        "  \"duration_s\": {},",
        format_secs(report.duration_ns())
    );
    let _ = writeln!(
        out,
        "  \"interval_s\": {},",
        format_secs(report.interval_ns)
    );
    let _ = writeln!(out, "  \"cost\": {},", report.cost);
    let _ = writeln!(out, "  \"keys\": {},", report.keys);
    out.push_str("  \"rules\": [\n");
    for (i, spec) in report.rules.iter().enumerate() {
        let comma = if i + 1 < report.rules.len() { "," } else { "" };
        let _ = writeln!(
            out,
            "    {{\"spec\": {}, \"algorithm\": \"{}\", \"limit\": {}}}{comma}",
            json_string(&spec.text),
            spec.algorithm(),
            spec.rule.limit()
        );
    }
    out.push_str("  ],\n  \"intervals\": [\n");
    for (i, row) in report.rows.iter().enumerate() {
        let comma = if i + 1 < report.rows.len() { "," } else { "" };
        let _ = writeln!(out, "    {}{comma}", json_row(report, row));
    }
    let _ = writeln!(
        out,
        "  ],\n  \"total\": {}\n}}",
        json_row(report, &report.total)
    );
    out
}

fn json_row(report: &Report, row: &Row) -> String {
    let results: Vec<String> = report
        .rules
        .iter()
        .zip(&row.tallies)
        .map(|(spec, t)| {
            let delay = match (spec.delays(), t.mean_delay_ns()) {
                (true, Some(ns)) => format!(", \"mean_delay_ms\": {}", millis(ns)),
                (true, None) => ", \"mean_delay_ms\": null".to_owned(),
                (false, _) => String::new(),
            };
            format!(
                "{{\"allowed\": {}, \"denied\": {}{delay}}}",
                t.allowed, t.denied
            )
        })
        .collect();
    format!(
        "{{\"start_s\": {}, \"end_s\": {}, \"sent\": {}, \"results\": [{}]}}",
        format_secs(row.start_ns),
        format_secs(row.end_ns),
        row.sent,
        results.join(", ")
    )
}

/// A JSON string literal (serde_json's escaping).
fn json_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::SECOND_NS;
    use crate::simulate::{run, Scenario};
    use crate::spec::parse_rule;
    use crate::traffic::parse_file;

    fn report() -> Report {
        let rules: Vec<_> = [
            "fixed_window:limit=10,window=1s",
            "leaky_queue:rate=10,per=1s,max_depth=5",
        ]
        .iter()
        .map(|t| parse_rule(t).unwrap())
        .collect();
        let traffic = parse_file(&"0.5\n".repeat(12), 1).unwrap();
        run(&Scenario {
            rules: &rules,
            traffic: &traffic,
            duration_ns: 2 * SECOND_NS,
            interval_ns: SECOND_NS,
            cost: 1,
        })
        .unwrap()
    }

    #[test]
    fn the_table_lines_up() {
        let table = table(&report());
        let expected = "\
interval  sent  [1] fixed_window  [2] leaky_queue
0s-1s       12  10/2              5/7 ~200ms
1s-2s        0   0/0              0/0
-------------------------------------------------
total       12  10/2              5/7 ~200ms
";
        assert!(table.ends_with(expected), "{table}");
        assert!(table.starts_with("2 rules: 12 requests over 2s in 1s intervals"));
        assert!(table.contains("  [2] leaky_queue:rate=10,per=1s,max_depth=5\n"));
    }

    #[test]
    fn csv_has_a_line_per_interval_and_rule() {
        let csv = csv(&report());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 3 * 2);
        assert_eq!(
            lines[1],
            "0,0,1,\"fixed_window:limit=10,window=1s\",fixed_window,12,10,2,"
        );
        assert_eq!(
            lines[6],
            "total,0,2,\"leaky_queue:rate=10,per=1s,max_depth=5\",leaky_queue,12,5,7,200"
        );
    }

    #[test]
    fn json_is_complete() {
        let json = json(&report());
        assert!(json.contains("\"spec\": \"fixed_window:limit=10,window=1s\""));
        assert!(json.contains(
            "{\"start_s\": 1, \"end_s\": 2, \"sent\": 0, \"results\": [{\"allowed\": 0, \
             \"denied\": 0}, {\"allowed\": 0, \"denied\": 0, \"mean_delay_ms\": null}]}"
        ));
        assert!(json.contains("\"total\": {\"start_s\": 0, \"end_s\": 2, \"sent\": 12"));
        assert_eq!(json_string("a\"b\\c\u{1}"), "\"a\\\"b\\\\c\\u0001\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
