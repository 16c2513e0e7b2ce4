//! `weir check-config [PATH]`: loads the rules exactly as `weir serve` would, from the
//! same choice of source (`PATH` or `--config` / `WEIR_CONFIG`, else envoyproxy/ratelimit's
//! `RUNTIME_*` variables and defaults, else the built-in example) through the same loader
//! (`weir_engine::RuleSource::load`: one listing of a runtime directory for both), and
//! prints what they hold, or the first error with its file, place and reason (exit 1).
//! Each rule's line says everything that decides how it limits: the algorithm, its limit
//! and window, warm-up, the mode (`exact` or `leased`), the lockout (and how far it
//! escalates), the failure policy (`on_failure`), cost, shadow and roll-out share.
//! Reads files; never starts a server.

use std::path::PathBuf;

use anyhow::{anyhow, Context as _};
use clap::Args;
use weir_config::RuleSet;
use weir_engine::RuleSource;

use crate::duration::{format_duration, nanos};
use crate::help;
use crate::ratelimit_env::{self, RatelimitEnv};

/// Options of `weir check-config`.
#[derive(Debug, Args)]
#[command(after_help = help::CHECK_CONFIG)]
pub(crate) struct CheckConfigArgs {
    /// A rule file, or a directory of *.yaml / *.yml rule files (as `weir serve --config`)
    #[arg(value_name = "PATH", conflicts_with = "config")]
    path: Option<PathBuf>,

    /// The same as PATH, named as `weir serve` names it [default: envoyproxy/ratelimit's
    /// runtime directory when its variables are set (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/
    /// RUNTIME_APPDIRECTORY, default /srv/runtime_data/current/config, every file in it
    /// as `weir serve` reads it), else the built-in example rules]
    #[arg(long, value_name = "PATH", env = "WEIR_CONFIG")]
    config: Option<PathBuf>,

    /// Read none of envoyproxy/ratelimit's environment variables (as `weir serve
    /// --no-ratelimit-env`)
    #[arg(long, env = "WEIR_NO_RATELIMIT_ENV")]
    no_ratelimit_env: bool,
}

impl CheckConfigArgs {
    /// The rule source `weir serve` would use with the same flags and variables.
    fn source(&self) -> anyhow::Result<RuleSource> {
        if let Some(path) = self.path.as_ref().or(self.config.as_ref()) {
            return Ok(RuleSource::Path(path.clone()));
        }
        let rl = if self.no_ratelimit_env {
            RatelimitEnv::default()
        } else {
            ratelimit_env::read(&|name| std::env::var(name).ok())
                .context("envoyproxy/ratelimit's environment (--no-ratelimit-env to ignore it)")?
        };
        Ok(crate::serve::rule_source(&rl).unwrap_or(RuleSource::Example))
    }
}

/// How a source is named in the summary.
fn describe(source: &RuleSource) -> String {
    match source {
        RuleSource::Path(path) | RuleSource::Runtime { dir: path, .. } => {
            path.display().to_string()
        }
        RuleSource::Example => "(built-in example)".to_string(),
        RuleSource::Inline { name, .. } => format!("(built-in {name})"),
        RuleSource::Xds { server } => format!("(xDS from {server})"),
    }
}

/// The summary `weir check-config` prints for valid rules.
pub(crate) fn summary(path: &str, rules: &RuleSet) -> String {
    let domains: Vec<&str> = rules.domains().collect();
    let mut out = format!(
        "{path}: OK, {} domain{}, {} rule{}\n",
        domains.len(),
        if domains.len() == 1 { "" } else { "s" },
        rules.rules().len(),
        if rules.rules().len() == 1 { "" } else { "s" },
    );
    // Aligned on the longest id, up to a point (ids are bounded, but a column need not be).
    let width = rules
        .rules()
        .iter()
        .map(|r| r.id.len())
        .max()
        .unwrap_or(0)
        .min(80);
    for rule in rules.rules() {
        let mut line = format!("  {:<width$}  {}", rule.id, rule.algorithm());
        if let Some(limit) = rule.capacity() {
            line.push_str(&format!(" {limit}"));
            if let Some(window) = rule.window().filter(|w| !w.is_zero()) {
                line.push_str(&format!(" per {}", format_duration(nanos(window))));
            }
        }
        if let Some(warmup) = rule.rule().and_then(|r| r.warmup()) {
            line.push_str(&format!(
                ", warming up over {} from 1/{} of the rate",
                format_duration(warmup.period_ns()),
                warmup.cold_factor()
            ));
        }
        if let Some(r) = rule.rule() {
            line.push_str(&format!(", {}", r.mode().name()));
            if let Some(lockout) = r.lockout() {
                line.push_str(&format!(
                    ", lockout {}",
                    format_duration(nanos(lockout.duration()))
                ));
                if lockout.max_duration() > lockout.duration() {
                    line.push_str(&format!(
                        " escalating to {}",
                        format_duration(nanos(lockout.max_duration()))
                    ));
                }
            }
            line.push_str(&format!(", on failure {}", r.failure_policy().name()));
        }
        if rule.cost > 1 {
            line.push_str(&format!(", cost {}", rule.cost));
        }
        if rule.shadow {
            line.push_str(", shadow");
        }
        if rule.enforce_percent < 100 {
            line.push_str(&format!(", enforced for {}% of keys", rule.enforce_percent));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Runs `weir check-config`.
pub(crate) fn check_config(args: &CheckConfigArgs) -> anyhow::Result<()> {
    let source = args.source()?;
    if let RuleSource::Xds { server } = &source {
        anyhow::bail!(
            "CONFIG_TYPE=GRPC_XDS_SOTW: weir serve would take its rules from the xDS management \
             server {server}, not from files; pass PATH to check a rule file (each xDS update is \
             checked by the same loader when it arrives, and refused with a NACK if invalid)"
        );
    }
    let rules = source.load().map_err(|e| anyhow!("{e}"))?;
    if rules.is_empty() {
        eprintln!(
            "warning: {}: no rule file; weir serve would start and answer every request OK \
             without a limit until rule files appear there (as envoyproxy/ratelimit does)",
            describe(&source)
        );
    }
    print!("{}", summary(&describe(&source), &rules));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warm-up changes what a rule admits at first: the summary says so.
    #[test]
    fn the_summary_shows_warm_up() {
        let yaml = "domain: api\ndescriptors:\n  - key: user\n    rule:\n      algorithm: gcra\n      rate: 100\n      per: 1s\n      burst: 100\n      warmup: 1m30s\n  - key: ip\n    rule:\n      algorithm: token_bucket\n      capacity: 10\n      rate: 10\n      per: 1s\n      warmup: 30s\n      cold_factor: 5\n  - key: plain\n    rule:\n      algorithm: gcra\n      rate: 1\n      per: 1s\n      burst: 1\n";
        let rules = RuleSet::parse("api.yaml", yaml).unwrap_or_else(|e| unreachable!("{e}"));
        let text = summary("api.yaml", &rules);
        assert!(
            text.contains("gcra 100 per 1s, warming up over 90s from 1/3 of the rate, exact"),
            "{text}"
        );
        assert!(
            text.contains(
                "token_bucket 10 per 1s, warming up over 30s from 1/5 of the rate, exact"
            ),
            "{text}"
        );
        assert!(
            !text
                .lines()
                .any(|l| l.contains("plain") && l.contains("warming")),
            "{text}"
        );
    }

    /// Issue 29: the mode, the lockout and the failure policy change what a rule does
    /// under attack and in an outage; the summary hid them.
    #[test]
    fn the_summary_shows_mode_lockout_and_failure_policy() {
        let yaml = "domain: api
descriptors:
  - key: login
    rule:
      algorithm: fixed_window
      limit: 5
      window: 1m
      lockout: {duration: 5m, max: 1h}
      on_failure: fail_closed
  - key: user
    rule:
      algorithm: gcra
      rate: 100
      per: 10s
      burst: 100
      mode: leased
  - key: ip
    rate_limit: {unit: second, requests_per_unit: 5}
";
        let rules = RuleSet::parse("api.yaml", yaml).unwrap_or_else(|e| unreachable!("{e}"));
        let text = summary("api.yaml", &rules);
        let line = |id: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(id))
                .unwrap_or_else(|| unreachable!("no line for {id}: {text}"))
                .to_string()
        };
        assert!(
            line("api.login").ends_with(
                "fixed_window 5 per 60s, exact, lockout 300s escalating to 3600s, on failure fail_closed"
            ),
            "{text}"
        );
        assert!(
            line("api.user").ends_with("gcra 100 per 10s, leased, on failure local_fallback"),
            "{text}"
        );
        assert!(
            line("api.ip").ends_with(", exact, on failure local_fallback"),
            "{text}"
        );
    }
}
