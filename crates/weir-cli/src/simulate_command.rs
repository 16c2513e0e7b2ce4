//! `weir simulate` as a command: its options and help, and the glue that turns them into
//! traffic, runs the simulation and writes the results. The only place (with `main.rs`) that
//! does I/O or uses `anyhow`; the work itself is in `traffic.rs`, `simulate.rs`, `render.rs`
//! and `svg.rs`.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};

use crate::duration::{format_duration, nanos, parse_duration};
use crate::simulate::{run, Scenario};
use crate::simulate_backend::{self, parse_backend, BackendSpec};
use crate::spec::{parse_rule, RuleSpec};
use crate::traffic::{generate, parse_file, Pattern, Rate, Traffic};
use crate::{help, render, svg};

/// The traffic pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum PatternKind {
    /// Evenly spaced requests at --rate
    Constant,
    /// --burst requests at once, every --every, over an optional background --rate
    Burst,
    /// Requests read from --input
    File,
}

/// How the results are printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// An aligned table for reading
    Table,
    /// CSV, one line per interval and rule
    Csv,
    /// JSON, one object
    Json,
}

/// Options of `weir simulate`.
#[derive(Debug, Args)]
#[command(after_help = help::SIMULATE, after_long_help = help::SIMULATE_LONG)]
pub(crate) struct SimulateArgs {
    /// A rule to try, as ALGORITHM:PARAM=VALUE,...; repeat it to compare rules side by side
    /// (each rule keeps its own state), e.g. --rule gcra:rate=10,per=1s,burst=10
    #[arg(long = "rule", value_name = "SPEC", required_unless_present = "backend", value_parser = parse_rule)]
    rules: Vec<RuleSpec>,

    /// Compare in-flight limits instead of rules: closed-loop clients against a backend
    /// whose best is `knee` in flight at `base` each (past it every request slows), through
    /// no limit, --max-in-flight N and auto, e.g. --backend knee=8,base=20ms (add
    /// halve-at=20s[,restore-at=40s] to halve its knee mid-run) [default --duration: 30s]
    #[arg(long, value_name = "SPEC", conflicts_with = "rules", value_parser = parse_backend)]
    backend: Option<BackendSpec>,

    /// With --backend: how many clients, each sending again as soon as answered (as wrk -c)
    #[arg(long, value_name = "N", default_value_t = 64, requires = "backend",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    clients: u32,

    /// With --backend: the static limit compared [default: the backend's knee]
    #[arg(long, value_name = "N", requires = "backend",
          value_parser = clap::value_parser!(u32).range(1..=10_000))]
    max_in_flight: Option<u32>,

    /// The traffic pattern [default: file with --input, burst with --burst, else constant]
    #[arg(long, value_enum, value_name = "PATTERN")]
    pattern: Option<PatternKind>,

    /// Requests per period, evenly spaced: the constant pattern, or background traffic
    /// under the bursts, e.g. --rate 30/s, --rate 100/1m, --rate 5/500ms
    #[arg(long, value_name = "COUNT/PERIOD")]
    rate: Option<Rate>,

    /// Requests in each burst, all at the same instant, e.g. --burst 50
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    burst: Option<u64>,

    /// Repeat the burst this often, e.g. --every 5s [default: a single burst]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    every: Option<Duration>,

    /// When the first burst comes, e.g. --offset 900ms [default: 0s]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    offset: Option<Duration>,

    /// The traffic file of the file pattern, `-` for stdin, e.g. --input requests.txt
    #[arg(long, value_name = "PATH")]
    input: Option<PathBuf>,

    /// Spread the requests round-robin over N keys (clients), each limited on its own,
    /// e.g. --keys 3
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u32).range(1..=100_000)
    )]
    keys: u32,

    /// How long to simulate, e.g. --duration 1m [default: 10s; with --input, up to the
    /// interval of the last request]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,

    /// The reporting interval: one table row and one bar per interval, e.g. --interval 500ms
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, default_value = "1s")]
    interval: Duration,

    /// Units each request uses (at most every rule's limit), e.g. --cost 2
    #[arg(
        long,
        value_name = "N",
        default_value_t = 1,
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    cost: u64,

    /// How to print the results on stdout, e.g. --format csv
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = Format::Table)]
    format: Format,

    /// Also draw the results as an SVG chart into FILE, relative to the current directory
    /// (e.g. --svg /tmp/burst.svg); a directory gets weir-simulate.svg inside it, and --svg
    /// alone writes ./weir-simulate.svg
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = ".")]
    svg: Option<PathBuf>,
}

const DEFAULT_DURATION: Duration = Duration::from_secs(10);

impl SimulateArgs {
    /// The pattern asked for, or the one the other options imply.
    fn pattern_kind(&self) -> PatternKind {
        match (self.pattern, &self.input, self.burst) {
            (Some(kind), _, _) => kind,
            (None, Some(_), _) => PatternKind::File,
            (None, None, Some(_)) => PatternKind::Burst,
            (None, None, None) => PatternKind::Constant,
        }
    }

    /// Rejects options that do not apply to the pattern, so none is silently ignored.
    fn check_options(&self, kind: PatternKind) -> anyhow::Result<()> {
        let given = [
            ("--rate", self.rate.is_some(), kind != PatternKind::File),
            ("--burst", self.burst.is_some(), kind == PatternKind::Burst),
            ("--every", self.every.is_some(), kind == PatternKind::Burst),
            (
                "--offset",
                self.offset.is_some(),
                kind == PatternKind::Burst,
            ),
            ("--input", self.input.is_some(), kind == PatternKind::File),
        ];
        let name = match kind {
            PatternKind::Constant => "constant",
            PatternKind::Burst => "burst",
            PatternKind::File => "file",
        };
        for (option, is_given, applies) in given {
            if is_given && !applies {
                bail!("{option} does not apply to --pattern {name}");
            }
        }
        Ok(())
    }

    /// The traffic and the simulated duration.
    fn traffic(&self) -> anyhow::Result<(Traffic, u64)> {
        let kind = self.pattern_kind();
        self.check_options(kind)?;
        let keys = usize::try_from(self.keys).context("--keys is too large")?;
        if kind == PatternKind::File {
            let Some(path) = &self.input else {
                bail!("--pattern file needs --input FILE (or --input - for stdin)");
            };
            let text = read_input(path)?;
            let source = match path.to_str() {
                Some("-") => "stdin".to_owned(),
                _ => path.display().to_string(),
            };
            let mut traffic = parse_file(&text, keys)
                .with_context(|| format!("reading traffic from {source}"))?;
            if traffic.arrivals.is_empty() {
                bail!("{source} holds no requests (one per line: TIME [KEY])");
            }
            let interval_ns = nanos(self.interval).max(1);
            let duration_ns = match self.duration {
                Some(d) => nanos(d),
                None => (traffic.last_ns() / interval_ns + 1).saturating_mul(interval_ns),
            };
            let dropped = traffic.truncate(duration_ns);
            if dropped > 0 {
                eprintln!(
                    "note: {dropped} requests at or after --duration {} are not replayed",
                    format_duration(duration_ns)
                );
            }
            return Ok((traffic, duration_ns));
        }
        let duration_ns = nanos(self.duration.unwrap_or(DEFAULT_DURATION));
        if duration_ns == 0 {
            bail!("--duration must be greater than zero");
        }
        if self.every.is_some_and(|e| e.is_zero()) {
            bail!("--every must be greater than zero (leave it out for a single burst)");
        }
        let pattern = match kind {
            PatternKind::Burst => Pattern::Burst {
                size: self
                    .burst
                    .context("--pattern burst needs --burst N, e.g. --burst 50")?,
                every: self.every,
                offset: self.offset.unwrap_or_default(),
                background: self.rate,
            },
            _ => Pattern::Constant(self.rate.context(
                "give some traffic: --rate 30/s, --burst 50 [--every 5s] or --input FILE",
            )?),
        };
        let traffic = generate(&pattern, duration_ns, keys).context("generating traffic")?;
        Ok((traffic, duration_ns))
    }
}

/// Reads the whole traffic file, or stdin for `-`.
fn read_input(path: &Path) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("reading traffic from stdin")?;
        Ok(text)
    } else {
        std::fs::read_to_string(path)
            .with_context(|| format!("reading traffic from {}", path.display()))
    }
}

/// Runs `weir simulate --backend`: none, static and auto side by side.
fn simulate_backend(args: &SimulateArgs, spec: &BackendSpec) -> anyhow::Result<()> {
    if args.format != Format::Table {
        bail!("--backend prints a table (and --svg a chart); --format does not apply");
    }
    let length = args.duration.unwrap_or(Duration::from_secs(30));
    if length.is_zero() || length > Duration::from_secs(3600) {
        bail!("--duration with --backend: above 0 and at most 1h");
    }
    let clients = usize::try_from(args.clients).context("--clients is too large")?;
    let fixed = match args.max_in_flight {
        Some(n) => usize::try_from(n).context("--max-in-flight is too large")?,
        None => spec.knee(),
    };
    let comparison = simulate_backend::compare(spec, clients, fixed, length)?;
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(simulate_backend::table(&comparison).as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the results to stdout")?;
    if let Some(path) = &args.svg {
        std::fs::write(path, simulate_backend::chart(&comparison))
            .with_context(|| format!("writing the chart to {}", path.display()))?;
        eprintln!("chart written to {}", path.display());
    }
    Ok(())
}

/// Runs `weir simulate`.
pub(crate) fn simulate(args: &SimulateArgs) -> anyhow::Result<()> {
    if let Some(spec) = &args.backend {
        return simulate_backend(args, spec);
    }
    let (traffic, duration_ns) = args.traffic()?;
    let report = run(&Scenario {
        rules: &args.rules,
        traffic: &traffic,
        duration_ns,
        interval_ns: nanos(args.interval),
        cost: args.cost,
    })?;
    let text = match args.format {
        Format::Table => render::table(&report),
        Format::Csv => render::csv(&report),
        Format::Json => render::json(&report),
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .context("writing the results to stdout")?;
    if let Some(asked) = &args.svg {
        let path = chart_path(asked);
        std::fs::write(&path, svg::chart(&report))
            .with_context(|| format!("writing the chart to {}", path.display()))?;
        // The full path, so a relative one is not a guess about the working directory.
        let shown = std::path::absolute(&path).unwrap_or(path);
        eprintln!("chart written to {}", shown.display());
    }
    Ok(())
}

/// The chart's file for `--svg asked`: the path as given (relative to the current
/// directory, as every path on the command line), or `weir-simulate.svg` inside it when it
/// is a directory (`--svg` alone is `.`).
fn chart_path(asked: &Path) -> PathBuf {
    if asked.is_dir() {
        asked.join("weir-simulate.svg")
    } else {
        asked.to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::{Cli, Command};

    fn args(line: &str) -> SimulateArgs {
        let words = ["weir", "simulate", "--rule", "gcra:rate=10,per=1s,burst=10"];
        let argv = words.into_iter().chain(line.split_whitespace());
        match Cli::try_parse_from(argv).unwrap().command {
            Command::Simulate(args) => args,
            other => panic!("not simulate: {other:?}"),
        }
    }

    #[test]
    fn the_pattern_follows_from_the_options() {
        assert_eq!(args("--rate 5/s").pattern_kind(), PatternKind::Constant);
        assert_eq!(
            args("--burst 5 --rate 5/s").pattern_kind(),
            PatternKind::Burst
        );
        assert_eq!(args("--input -").pattern_kind(), PatternKind::File);
        assert_eq!(
            args("--pattern burst --input -").pattern_kind(),
            PatternKind::Burst
        );
    }

    #[test]
    fn options_that_do_not_apply_are_refused() {
        let err = |line: &str| args(line).traffic().unwrap_err().to_string();
        assert_eq!(
            err("--rate 5/s --every 1s"),
            "--every does not apply to --pattern constant"
        );
        assert_eq!(
            err("--input - --rate 5/s"),
            "--rate does not apply to --pattern file"
        );
        assert_eq!(
            err("--pattern burst"),
            "--pattern burst needs --burst N, e.g. --burst 50"
        );
        assert_eq!(
            err("--burst 5 --every 0s"),
            "--every must be greater than zero (leave it out for a single burst)"
        );
        assert!(err("").starts_with("give some traffic"));
    }

    #[test]
    fn generated_traffic_defaults_to_ten_seconds() {
        let (traffic, duration_ns) = args("--burst 3 --every 5s --keys 2").traffic().unwrap();
        assert_eq!(duration_ns, 10_000_000_000);
        assert_eq!(traffic.arrivals.len(), 6);
        assert_eq!(traffic.keys.len(), 2);
    }
}
