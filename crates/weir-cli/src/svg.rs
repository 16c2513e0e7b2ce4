//! The chart of a simulation [`Report`], as a standalone SVG written by hand: one panel per
//! rule, a stacked bar per interval (allowed below, denied above, so a bar's height is what
//! was sent), all panels on the same scale so the rules compare at a glance. Drawing only;
//! `simulate_command.rs` writes the file.

use std::fmt::Write as _;

use crate::duration::{format_approx, format_duration};
use crate::render::span;
use crate::simulate::{Report, Tally};

const WIDTH: f64 = 960.0;
const LEFT: f64 = 76.0;
const RIGHT: f64 = 24.0;
const HEADER: f64 = 92.0;
const PANEL: f64 = 200.0;
const PLOT_TOP: f64 = 34.0;
const PLOT: f64 = 124.0;
const FOOTER: f64 = 36.0;
const ALLOWED: &str = "#4e79a7";
const DENIED: &str = "#f28e2b";
const FONT: &str =
    "font-family=\"system-ui, -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif\"";

/// The smallest `1, 2, 5 × 10^k` at least `x` (at least 1).
fn nice(x: u64) -> u64 {
    let mut step = 1u64;
    loop {
        for m in [1, 2, 5] {
            let candidate = step.saturating_mul(m);
            if candidate >= x || candidate == u64::MAX {
                return candidate;
            }
        }
        step = step.saturating_mul(10);
    }
}

/// Escapes text for SVG content and attributes.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "0%".to_owned();
    }
    format!("{:.0}%", part as f64 * 100.0 / whole as f64)
}

/// The whole chart.
pub(crate) fn chart(report: &Report) -> String {
    let rules = report.rules.len();
    let height = HEADER + PANEL * rules as f64 + FOOTER;
    let plot_width = WIDTH - LEFT - RIGHT;
    let peak = report.rows.iter().map(|r| r.sent).max().unwrap_or(0).max(1);
    let y_step = nice(peak.div_ceil(4));
    let y_max = peak.div_ceil(y_step) * y_step;
    let intervals = report.rows.len().max(1);
    let bar = plot_width / intervals as f64;
    let gap = if bar > 4.0 { bar * 0.12 } else { 0.0 };
    let x_step = nice(u64::try_from(intervals.div_ceil(10)).unwrap_or(1));

    let mut out = String::new();
    let _ = writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{height}\" \
         viewBox=\"0 0 {WIDTH} {height}\" {FONT} font-size=\"12\">"
    );
    let title = match rules {
        1 => "weir simulate: one rule".to_owned(),
        n => format!("weir simulate: {n} rules, the same traffic"),
    };
    let _ = writeln!(out, "<title>{}</title>", escape(&title));
    let _ = writeln!(out, "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>");
    let _ = writeln!(
        out,
        "<text x=\"{LEFT}\" y=\"30\" font-size=\"18\" font-weight=\"600\">{}</text>",
        escape(&title)
    );
    let _ = writeln!(
        out,
        "<text x=\"{LEFT}\" y=\"52\" fill=\"#555\">{}</text>",
        escape(&report.summary())
    );
    // Legend.
    for (i, (color, label)) in [
        (ALLOWED, "allowed"),
        (DENIED, "denied (bar height = requests sent)"),
    ]
    .iter()
    .enumerate()
    {
        let x = LEFT + 110.0 * i as f64;
        let _ = writeln!(
            out,
            "<rect x=\"{x}\" y=\"66\" width=\"12\" height=\"12\" fill=\"{color}\"/>\
             <text x=\"{}\" y=\"76\">{label}</text>",
            x + 17.0
        );
    }

    for (r, spec) in report.rules.iter().enumerate() {
        let top = HEADER + PANEL * r as f64;
        let plot_top = top + PLOT_TOP;
        let base = plot_top + PLOT;
        let y = |v: u64| base - PLOT * v as f64 / y_max as f64;
        let total = report.total.tallies.get(r).copied().unwrap_or_default();
        let mut heading = format!(
            "[{}] {}: {} allowed ({}), {} denied",
            r + 1,
            spec.text,
            total.allowed,
            percent(total.allowed, report.total.sent),
            total.denied
        );
        if let (true, Some(ns)) = (spec.delays(), total.mean_delay_ns()) {
            let _ = write!(heading, ", mean delay {}", format_approx(ns));
        }
        let _ = writeln!(out, "<g>");
        let _ = writeln!(
            out,
            "<text x=\"{LEFT}\" y=\"{}\" font-size=\"14\" font-weight=\"600\">{}</text>",
            top + 20.0,
            escape(&heading)
        );
        // Y grid and ticks.
        let mut v = 0;
        while v <= y_max {
            let _ = writeln!(
                out,
                "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e3e3e3\"/>\
                 <text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" fill=\"#555\">{v}</text>",
                LEFT + plot_width,
                LEFT - 6.0,
                y(v) + 4.0,
                y = y(v),
            );
            v += y_step;
        }
        let _ = writeln!(
            out,
            "<text transform=\"translate({},{:.1}) rotate(-90)\" text-anchor=\"middle\" \
             fill=\"#555\">requests per {}</text>",
            LEFT - 44.0,
            plot_top + PLOT / 2.0,
            format_duration(report.interval_ns)
        );
        // Bars.
        for (i, row) in report.rows.iter().enumerate() {
            let t: Tally = row.tallies.get(r).copied().unwrap_or_default();
            let x = LEFT + bar * i as f64 + gap;
            let w = (bar - 2.0 * gap).max(0.5);
            let mut tip = format!(
                "{}: {} sent, {} allowed, {} denied",
                span(row),
                row.sent,
                t.allowed,
                t.denied
            );
            if let (true, Some(ns)) = (spec.delays(), t.mean_delay_ns()) {
                let _ = write!(tip, ", mean delay {}", format_approx(ns));
            }
            let _ = write!(out, "<g><title>{}</title>", escape(&tip));
            if t.allowed > 0 {
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" \
                     fill=\"{ALLOWED}\"/>",
                    y(t.allowed),
                    base - y(t.allowed)
                );
            }
            if t.denied > 0 {
                let stacked = t.allowed + t.denied;
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" \
                     fill=\"{DENIED}\"/>",
                    y(stacked),
                    y(t.allowed) - y(stacked)
                );
            }
            let _ = writeln!(out, "</g>");
        }
        // X axis and ticks at interval boundaries.
        let _ = writeln!(
            out,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{base:.1}\" y2=\"{base:.1}\" stroke=\"#333\"/>",
            LEFT + plot_width
        );
        let mut i = 0u64;
        let last = u64::try_from(intervals).unwrap_or(u64::MAX);
        while i <= last {
            let x = LEFT + bar * i as f64;
            let at_ns = report
                .rows
                .get(usize::try_from(i).unwrap_or(usize::MAX))
                .map_or(report.duration_ns(), |row| row.start_ns);
            let _ = writeln!(
                out,
                "<line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{base:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\
                 <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">{}</text>",
                base + 4.0,
                base + 17.0,
                format_duration(at_ns)
            );
            i += x_step;
        }
        let _ = writeln!(out, "</g>");
    }
    let _ = writeln!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#555\">time since the \
         start (one bar per {} interval)</text>",
        LEFT + plot_width / 2.0,
        height - 12.0,
        format_duration(report.interval_ns)
    );
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::duration::SECOND_NS;
    use crate::simulate::{run, Scenario};
    use crate::spec::parse_rule;
    use crate::traffic::parse_file;

    #[test]
    fn nice_steps() {
        let steps: Vec<u64> = [0, 1, 3, 7, 12, 30, 51].into_iter().map(nice).collect();
        assert_eq!(steps, [1, 1, 5, 10, 20, 50, 100]);
    }

    #[test]
    fn the_chart_has_a_panel_per_rule_and_escapes_text() {
        let rules: Vec<_> = [
            "fixed_window:limit=10,window=1s",
            "leaky_queue:rate=10,per=1s,max_depth=5",
        ]
        .iter()
        .map(|t| parse_rule(t).unwrap())
        .collect();
        let traffic = parse_file(&"0.5\n".repeat(12), 1).unwrap();
        let report = run(&Scenario {
            rules: &rules,
            traffic: &traffic,
            duration_ns: 2 * SECOND_NS,
            interval_ns: SECOND_NS,
            cost: 1,
        })
        .unwrap();
        let svg = chart(&report);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>\n"));
        assert!(svg.contains("[1] fixed_window:limit=10,window=1s: 10 allowed (83%), 2 denied"));
        assert!(svg.contains("5 allowed (42%), 7 denied, mean delay 200ms"));
        assert!(svg.contains("0s-1s: 12 sent, 10 allowed, 2 denied"));
        assert_eq!(svg.matches("<g>").count(), svg.matches("</g>").count());
    }

    #[test]
    fn escape_covers_markup() {
        assert_eq!(escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
    }
}
