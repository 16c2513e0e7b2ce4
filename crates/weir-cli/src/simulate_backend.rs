//! `weir simulate --backend`: in-flight limits, not rate rules, side by side. Closed-loop
//! clients (as `wrk -c N`) against a modelled backend that collapses past its knee
//! (`weir_core::adaptive::Knee`), through no limit, a static `--max-in-flight`, and the
//! adaptive limit (`auto`, its default knobs), on simulated time
//! (`weir_core::adaptive::simulate`). Parsing the spec, the table and the SVG chart; the
//! command (`simulate_command.rs`) prints and writes them.

use std::fmt::Write as _;
use std::time::Duration;

use weir_core::adaptive::{simulate, AdaptiveSettings, Gate, Knee, Phase, Run};

use crate::duration::{format_duration, nanos, parse_duration};

/// `--backend knee=8,base=20ms[,halve-at=20s][,restore-at=40s]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackendSpec {
    knee: Knee,
    halve_at: Option<Duration>,
    restore_at: Option<Duration>,
}

/// Parses a backend spec (clap's value parser).
pub(crate) fn parse_backend(text: &str) -> Result<BackendSpec, String> {
    let mut knee = None;
    let mut base = None;
    let mut halve_at = None;
    let mut restore_at = None;
    for part in text.split(',') {
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| format!("'{part}': write NAME=VALUE, e.g. knee=8,base=20ms"))?;
        let duration = || parse_duration(value.trim()).map_err(|e| format!("{name}: {e}"));
        match name.trim() {
            "knee" => {
                let n: usize = value.trim().parse().map_err(|_| {
                    format!("knee '{value}': the best number in flight, 1 to 10000")
                })?;
                if !(1..=10_000).contains(&n) {
                    return Err(format!("knee {n}: the best number in flight, 1 to 10000"));
                }
                knee = Some(n);
            }
            "base" => base = Some(duration()?),
            "halve-at" => halve_at = Some(duration()?),
            "restore-at" => restore_at = Some(duration()?),
            other => {
                return Err(format!(
                    "unknown '{other}' (knee, base, halve-at, restore-at)"
                ))
            }
        }
    }
    let (Some(knee), Some(base)) = (knee, base) else {
        return Err("give knee=N and base=DURATION, e.g. knee=8,base=20ms".to_string());
    };
    if base.is_zero() || base > Duration::from_secs(60) {
        return Err("base: the latency up to the knee, above 0 and at most 60s".to_string());
    }
    Ok(BackendSpec {
        knee: Knee { knee, base },
        halve_at,
        restore_at,
    })
}

impl BackendSpec {
    /// The knee: the static limit compared unless told.
    pub(crate) fn knee(&self) -> usize {
        self.knee.knee
    }

    /// The backend's phases: as given, its knee halved from `halve-at`, back at
    /// `restore-at`.
    fn phases(&self) -> Vec<Phase> {
        let mut phases = vec![Phase {
            from: Duration::ZERO,
            backend: self.knee,
        }];
        if let Some(at) = self.halve_at {
            let half = Knee {
                knee: (self.knee.knee / 2).max(1),
                ..self.knee
            };
            phases.push(Phase {
                from: at,
                backend: half,
            });
            if let Some(back) = self.restore_at.filter(|b| *b > at) {
                phases.push(Phase {
                    from: back,
                    backend: self.knee,
                });
            }
        }
        phases
    }
}

/// The three runs compared.
pub(crate) struct Comparison {
    spec: BackendSpec,
    clients: usize,
    fixed: usize,
    runs: [(String, Run); 3],
}

/// Runs none, static `fixed` and auto for `clients` over `length`.
pub(crate) fn compare(
    spec: &BackendSpec,
    clients: usize,
    fixed: usize,
    length: Duration,
) -> Result<Comparison, weir_core::adaptive::AdaptiveError> {
    let phases = spec.phases();
    let run = |gate: &Gate| simulate(gate, &phases, clients, length);
    Ok(Comparison {
        spec: spec.clone(),
        clients,
        fixed,
        runs: [
            ("none".to_string(), run(&Gate::None)?),
            (format!("static {fixed}"), run(&Gate::Static(fixed))?),
            (
                "auto".to_string(),
                run(&Gate::Adaptive(AdaptiveSettings::default()))?,
            ),
        ],
    })
}

fn ms(d: Duration) -> String {
    format!("{:.0}ms", d.as_secs_f64() * 1000.0)
}

/// The table: one row per second (goodput and limit for each), then the totals.
pub(crate) fn table(c: &Comparison) -> String {
    let mut out = String::new();
    let k = c.spec.knee;
    let _ = writeln!(
        out,
        "backend: best {} in flight at {} each ({:.0} req/s){}; {} clients, each sending again as soon as answered",
        k.knee,
        format_duration(nanos(k.base)),
        k.throughput(k.knee),
        c.spec.halve_at.map_or(String::new(), |h| format!(
            ", knee halved at {}{}",
            format_duration(nanos(h)),
            c.spec.restore_at.map_or(String::new(), |r| format!(
                ", restored at {}",
                format_duration(nanos(r))
            ))
        )),
        c.clients,
    );
    let _ = write!(out, "{:>6}", "second");
    for (name, _) in &c.runs {
        let _ = write!(out, " | {:>20}", format!("{name}: req/s (limit)"));
    }
    out.push('\n');
    let seconds = c
        .runs
        .iter()
        .map(|(_, r)| r.seconds.len())
        .min()
        .unwrap_or(0);
    for i in 0..seconds {
        let _ = write!(out, "{i:>6}");
        for (_, run) in &c.runs {
            if let Some(s) = run.seconds.get(i) {
                let _ = write!(out, " | {:>20}", format!("{} ({})", s.goodput, s.limit));
            }
        }
        out.push('\n');
    }
    out.push('\n');
    let _ = writeln!(
        out,
        "{:>10} | {:>14} | {:>8} | {:>8}",
        "gate", "goodput req/s", "p50", "p99"
    );
    for (name, run) in &c.runs {
        let _ = writeln!(
            out,
            "{name:>10} | {:>14.0} | {:>8} | {:>8}",
            run.goodput,
            ms(run.p50),
            ms(run.p99)
        );
    }
    let _ = writeln!(
        out,
        "(static {} is the number someone had to know; auto found it by measuring)",
        c.fixed
    );
    out
}

/// The chart: goodput per second of the three, and the adaptive limit, as one SVG.
pub(crate) fn chart(c: &Comparison) -> String {
    const W: f64 = 960.0;
    const H: f64 = 420.0;
    const LEFT: f64 = 70.0;
    const TOP: f64 = 50.0;
    const PLOT_W: f64 = 850.0;
    const PLOT_H: f64 = 300.0;
    const COLOURS: [&str; 3] = ["#e15759", "#4e79a7", "#59a14f"];
    let seconds = c
        .runs
        .iter()
        .map(|(_, r)| r.seconds.len())
        .max()
        .unwrap_or(1)
        .max(1);
    let best = c.spec.knee.throughput(c.spec.knee.knee);
    let top = c
        .runs
        .iter()
        .flat_map(|(_, r)| r.seconds.iter().map(|s| s.goodput as f64))
        .fold(best, f64::max)
        * 1.1;
    let x = |i: usize| LEFT + PLOT_W * (i as f64 + 0.5) / seconds as f64;
    let y = |v: f64| TOP + PLOT_H - PLOT_H * v / top;
    let mut svg = String::new();
    let _ = writeln!(
        svg,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" viewBox=\"0 0 {W} {H}\" font-family=\"system-ui, sans-serif\" font-size=\"12\">"
    );
    let _ = writeln!(svg, "<rect width=\"{W}\" height=\"{H}\" fill=\"white\"/>");
    let _ = writeln!(
        svg,
        "<text x=\"{LEFT}\" y=\"24\" font-size=\"15\">Requests/s reaching a backend whose best is {} in flight ({:.0}/s), {} clients</text>",
        c.spec.knee.knee, best, c.clients
    );
    for step in 0..=4 {
        let v = top * f64::from(step) / 4.0;
        let _ = writeln!(
            svg,
            "<line x1=\"{LEFT}\" x2=\"{}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\">{v:.0}</text>",
            LEFT + PLOT_W,
            LEFT - 6.0,
            y(v) + 4.0,
            y = y(v)
        );
    }
    for (n, ((name, run), colour)) in c.runs.iter().zip(COLOURS).enumerate() {
        let points: Vec<String> = run
            .seconds
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{:.1},{:.1}", x(i), y(s.goodput as f64)))
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            points.join(" ")
        );
        let _ = writeln!(
            svg,
            "<text x=\"{}\" y=\"{}\" fill=\"{colour}\">{name}: {:.0} req/s, p99 {}</text>",
            LEFT + 220.0 * n as f64,
            TOP + PLOT_H + 30.0,
            run.goodput,
            ms(run.p99)
        );
    }
    if let Some((_, auto)) = c.runs.get(2) {
        let top_limit = auto
            .seconds
            .iter()
            .map(|s| s.limit)
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let points: Vec<String> = auto
            .seconds
            .iter()
            .enumerate()
            .map(|(i, s)| {
                format!(
                    "{:.1},{:.1}",
                    x(i),
                    TOP + PLOT_H - PLOT_H * 0.4 * s.limit as f64 / top_limit
                )
            })
            .collect();
        let _ = writeln!(
            svg,
            "<polyline fill=\"none\" stroke=\"#59a14f\" stroke-dasharray=\"4 3\" points=\"{}\"/>",
            points.join(" ")
        );
        let _ = writeln!(
            svg,
            "<text x=\"{LEFT}\" y=\"{}\" fill=\"#59a14f\">dashed: the auto limit (0 to {top_limit:.0} in flight, lower part of the plot)</text>",
            TOP + PLOT_H + 50.0
        );
    }
    let _ = writeln!(
        svg,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">seconds 0 to {seconds}</text>",
        LEFT + PLOT_W,
        TOP + PLOT_H + 16.0
    );
    svg.push_str("</svg>\n");
    svg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_bad_ones_say_how_to_write_them() {
        let spec = parse_backend("knee=8,base=20ms").unwrap();
        assert_eq!(spec.knee.knee, 8);
        assert_eq!(spec.phases().len(), 1);
        let spec = parse_backend("knee=8,base=20ms,halve-at=10s,restore-at=20s").unwrap();
        assert_eq!(spec.phases()[1].backend.knee, 4);
        assert_eq!(spec.phases().len(), 3);
        assert_eq!(
            parse_backend("knee=8").unwrap_err(),
            "give knee=N and base=DURATION, e.g. knee=8,base=20ms"
        );
        assert!(parse_backend("knee=0,base=20ms").is_err());
        assert!(parse_backend("knee=8,base=0s").is_err());
        assert!(parse_backend("knee=8,base=20ms,speed=2").is_err());
    }

    #[test]
    fn the_table_and_chart_show_auto_beating_no_limit() {
        let spec = parse_backend("knee=8,base=20ms").unwrap();
        let c = compare(&spec, 64, 8, Duration::from_secs(10)).unwrap();
        let none = c.runs[0].1.goodput;
        let auto = c.runs[2].1.goodput;
        assert!(none < 220.0 && auto > 320.0, "none {none}, auto {auto}");
        let table = table(&c);
        assert!(table.contains("static 8"), "{table}");
        assert!(
            table.lines().any(|l| l.trim_start().starts_with("auto |")),
            "{table}"
        );
        let svg = chart(&c);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 4);
    }
}
