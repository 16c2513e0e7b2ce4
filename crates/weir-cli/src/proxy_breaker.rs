//! `weir proxy`'s circuit-breaker options (`--breaker`, `--breaker-*`, each also a
//! `WEIR_BREAKER*` environment variable), flattened into `ProxyArgs` and turned into
//! `weir_proxy::BreakerSettings`. Off unless `--breaker` or any `--breaker-*` option is
//! given; why off: `docs/circuit-breaking.md`.

use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use weir_proxy::BreakerSettings;

use crate::duration::parse_duration;

/// The circuit-breaker options of `weir proxy`.
#[derive(Debug, Args)]
pub(crate) struct BreakerArgs {
    /// A circuit breaker for each upstream (--upstream, --fallback-upstream, each
    /// --class-upstream): once an upstream fails (a 5xx, unreachable, no answer in time) or
    /// is slow too often, its calls go to --fallback-upstream, or get 503 with Retry-After
    /// (the seconds until probes), without reaching it, until probe calls find it well again. Off by default (a
    /// request that makes the backend fail counts for everyone; see
    /// docs/circuit-breaking.md). Any --breaker-* option turns it on too
    #[arg(long, env = "WEIR_BREAKER", help_heading = "Circuit breaker")]
    breaker: bool,

    /// The share of the window's calls that failed (a 5xx other than 501 and 505,
    /// unreachable, timed out; never a 4xx) at or above which the circuit opens: a ratio
    /// above 0 and at most 1 (0.5) or a percentage (50%) [default: 0.5]
    #[arg(long, value_name = "RATIO", env = "WEIR_BREAKER_ERROR_RATIO",
          value_parser = parse_ratio, help_heading = "Circuit breaker")]
    breaker_error_ratio: Option<f64>,

    /// A call whose response head takes longer than this is slow: its answer still reaches
    /// the client; it counts towards --breaker-slow-ratio, and a slow probe opens the
    /// circuit again [default: 5s]
    #[arg(long, value_name = "DURATION", env = "WEIR_BREAKER_SLOW_CALL",
          value_parser = parse_duration, help_heading = "Circuit breaker")]
    breaker_slow_call: Option<Duration>,

    /// The share of the window's calls that were slow (--breaker-slow-call) at or above which
    /// the circuit opens: a ratio above 0 and at most 1 (0.8) or a percentage (80%)
    /// [default: 0.8]
    #[arg(long, value_name = "RATIO", env = "WEIR_BREAKER_SLOW_RATIO",
          value_parser = parse_ratio, help_heading = "Circuit breaker")]
    breaker_slow_ratio: Option<f64>,

    /// How far back calls are counted (a sliding window of ten buckets) [default: 10s]
    #[arg(long, value_name = "DURATION", env = "WEIR_BREAKER_WINDOW",
          value_parser = parse_duration, help_heading = "Circuit breaker")]
    breaker_window: Option<Duration>,

    /// The fewest calls in the window before either ratio is read, so that a few failures
    /// of a quiet upstream open nothing [default: 20]
    #[arg(long, value_name = "N", env = "WEIR_BREAKER_MIN_CALLS",
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "Circuit breaker")]
    breaker_min_calls: Option<u32>,

    /// How long an open circuit keeps calls from its upstream (Retry-After says what is
    /// left) before probes go through [default: 30s]
    #[arg(long, value_name = "DURATION", env = "WEIR_BREAKER_OPEN_FOR",
          value_parser = parse_duration, help_heading = "Circuit breaker")]
    breaker_open_for: Option<Duration>,

    /// How many probe calls go through once the wait is over (half-open; the others get
    /// the fallback or 503): all fine closes the circuit, one failed or slow opens it
    /// again [default: 5]
    #[arg(long, value_name = "N", env = "WEIR_BREAKER_PROBES",
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "Circuit breaker")]
    breaker_probes: Option<u32>,
}

impl BreakerArgs {
    /// The breaker's settings, or `None` when it is off.
    pub(crate) fn settings(&self) -> anyhow::Result<Option<BreakerSettings>> {
        let mut s = BreakerSettings::default();
        let mut on = self.breaker;
        let mut set = |given: bool| on |= given;
        set(self.breaker_error_ratio.is_some());
        set(self.breaker_slow_call.is_some());
        set(self.breaker_slow_ratio.is_some());
        set(self.breaker_window.is_some());
        set(self.breaker_min_calls.is_some());
        set(self.breaker_open_for.is_some());
        set(self.breaker_probes.is_some());
        if !on {
            return Ok(None);
        }
        s.error_ratio = self.breaker_error_ratio.unwrap_or(s.error_ratio);
        s.slow_call = self.breaker_slow_call.unwrap_or(s.slow_call);
        s.slow_ratio = self.breaker_slow_ratio.unwrap_or(s.slow_ratio);
        s.window = self.breaker_window.unwrap_or(s.window);
        s.min_calls = self.breaker_min_calls.unwrap_or(s.min_calls);
        s.open_for = self.breaker_open_for.unwrap_or(s.open_for);
        s.probes = self.breaker_probes.unwrap_or(s.probes);
        s.check().context("--breaker-*")?;
        Ok(Some(s))
    }
}

/// A ratio above 0 and at most 1 (`0.5`), or a percentage (`50%`).
fn parse_ratio(text: &str) -> Result<f64, String> {
    let text = text.trim();
    let (number, scale) = match text.strip_suffix('%') {
        Some(percent) => (percent.trim(), 100.0),
        None => (text, 1.0),
    };
    let value = number
        .parse::<f64>()
        .map_err(|_| format!("{text:?}: write a ratio like 0.5 or a percentage like 50%"))?
        / scale;
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(format!(
            "{text:?}: a ratio must be above 0 and at most 1 (100%)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        breaker: BreakerArgs,
    }

    fn settings(args: &[&str]) -> Option<BreakerSettings> {
        let cli = Cli::try_parse_from(std::iter::once("weir").chain(args.iter().copied())).unwrap();
        cli.breaker.settings().unwrap()
    }

    #[test]
    fn off_unless_asked_and_any_knob_turns_it_on() {
        assert_eq!(settings(&[]), None);
        assert_eq!(settings(&["--breaker"]), Some(BreakerSettings::default()));
        let s = settings(&["--breaker-open-for", "1m", "--breaker-error-ratio", "25%"]).unwrap();
        assert_eq!(s.open_for, Duration::from_secs(60));
        assert!((s.error_ratio - 0.25).abs() < f64::EPSILON);
        assert_eq!(s.probes, BreakerSettings::default().probes);
    }

    #[test]
    fn bad_values_say_what_is_wrong() {
        for (args, message) in [
            (
                &["--breaker-slow-ratio", "1.5"][..],
                "a ratio must be above 0 and at most 1",
            ),
            (
                &["--breaker-error-ratio", "half"][..],
                "write a ratio like 0.5",
            ),
            (&["--breaker-probes", "0"][..], "0 is not in 1.."),
        ] {
            let e = Cli::try_parse_from(std::iter::once("weir").chain(args.iter().copied()))
                .unwrap_err()
                .to_string();
            assert!(e.contains(message), "{args:?}: {e}");
        }
        let cli = Cli::try_parse_from(["weir", "--breaker-window", "0s"]).unwrap();
        let e = format!("{:#}", cli.breaker.settings().unwrap_err());
        assert_eq!(e, "--breaker-*: breaker window must be above zero");
    }

    /// The `[default: …]` each `--breaker-*` option's help states is written by hand (the
    /// option is unset until given, so that any of them turns the breaker on): given back
    /// to the options, the stated defaults must be `BreakerSettings::default()`.
    #[test]
    fn the_help_states_the_real_defaults() {
        use clap::CommandFactory as _;
        let help = Cli::command().render_long_help().to_string();
        let mut args = Vec::new();
        for flag in [
            "--breaker-error-ratio",
            "--breaker-slow-call",
            "--breaker-slow-ratio",
            "--breaker-window",
            "--breaker-min-calls",
            "--breaker-open-for",
            "--breaker-probes",
        ] {
            let at = help
                .find(&format!("{flag} <"))
                .unwrap_or_else(|| panic!("{flag} is in --help"));
            let text = &help[at..];
            let start = text.find("[default: ").expect("a stated default") + "[default: ".len();
            let end = start + text[start..].find(']').unwrap();
            args.push(flag.to_string());
            args.push(text[start..end].to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(
            settings(&args),
            Some(BreakerSettings::default()),
            "{args:?}"
        );
    }
}
