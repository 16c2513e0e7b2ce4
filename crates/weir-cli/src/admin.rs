//! `weir admin`: the operator's verbs against a running `weir serve` or `weir proxy`, over
//! its admin API (`/admin/...`, bearer token). This file holds the options, reads the token
//! and talks HTTP (`weir_server::client`, one connection per call); `admin_render.rs`
//! turns each answer into readable text. The server decides everything: this is a client,
//! it never opens a store.
//!
//! The token comes from `WEIR_ADMIN_TOKEN` or `--admin-token-file` (never from a flag's
//! value, which any user on the host could read in `ps`), and is never printed. Exit
//! status: 0 done, 1 an error (no server, refused, a bad request: the server's reason is
//! printed), 2 a usage error (clap's).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{anyhow, bail, Context as _};
use clap::{Args, Subcommand};
use serde_json::{json, Value};

use crate::admin_render as render;
use crate::decide::{parse_descriptor, DescriptorSpec};
use crate::duration::parse_duration;
use crate::help;

/// Options of `weir admin`.
#[derive(Debug, Args)]
#[command(after_help = help::ADMIN)]
pub(crate) struct AdminArgs {
    /// The server's HTTP address (weir serve --http, weir proxy --api)
    #[arg(
        long,
        value_name = "URL",
        env = "WEIR_ADMIN_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    server: String,

    /// A file holding the admin token (or set WEIR_ADMIN_TOKEN; never a flag value, which
    /// `ps` shows)
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_ADMIN_TOKEN_FILE",
        global = true
    )]
    admin_token_file: Option<PathBuf>,

    /// Print the server's JSON answer instead of a summary
    #[arg(long, global = true)]
    json: bool,

    /// Give up after this long
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration,
          global = true)]
    timeout: Duration,

    #[command(subcommand)]
    verb: Verb,
}

/// The key a verb acts on: a domain and one descriptor, as a decision names it.
#[derive(Debug, Args)]
pub(crate) struct KeyArgs {
    /// The domain of the rule
    #[arg(long, value_name = "DOMAIN")]
    domain: String,

    /// The descriptor, as KEY=VALUE[,KEY=VALUE...] (the entries a check sends)
    #[arg(long = "descriptor", short = 'd', value_name = "ENTRIES", value_parser = parse_descriptor)]
    descriptor: DescriptorSpec,
}

/// What `weir admin` can do.
#[derive(Debug, Subcommand)]
pub(crate) enum Verb {
    /// List the rules in force, with the config status
    Rules,
    /// Show a key's usage, block and lockout strikes under the rule it matches (changes nothing)
    Inspect(KeyArgs),
    /// Would one more request of the key pass now? (consumes nothing)
    Peek(KeyArgs),
    /// Deny the key for a while (replaces any block it has; usage and strikes are kept)
    Block {
        #[command(flatten)]
        key: KeyArgs,
        /// How long, e.g. 10m, 1h
        #[arg(long = "for", value_name = "DURATION", value_parser = parse_duration)]
        duration: Duration,
    },
    /// Let the key try again now: lift its block or lockout and forgive its strikes
    Unblock(KeyArgs),
    /// Forget everything about the key: usage, block and strikes
    Reset(KeyArgs),
    /// Add usage to the key (a request found expensive after the fact); never lifts a block
    Penalty {
        #[command(flatten)]
        key: KeyArgs,
        /// Units of usage to add
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u64).range(1..))]
        units: u64,
    },
    /// Give usage back to the key (a request that turned out free); never lifts a block
    Reward {
        #[command(flatten)]
        key: KeyArgs,
        /// Units of usage to give back
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u64).range(1..))]
        units: u64,
    },
    /// List the keys blocked now, by hand or by a lockout (memory store only)
    Blocked {
        /// List at most this many (the server lists at most 1000)
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: usize,
    },
    /// The most denied keys: enforced denials, then apart those not enforced (shadow, roll-out)
    TopDenied {
        /// List at most this many of each
        #[arg(long, value_name = "N", default_value_t = 20)]
        limit: usize,
    },
    /// Read the rule files again now (invalid rules are refused and the old ones kept)
    Reload,
}

/// One admin call: method, path and body.
struct Call {
    method: &'static str,
    path: String,
    body: Option<Value>,
}

fn key_body(key: &KeyArgs) -> Value {
    let entries: Vec<Value> = key
        .descriptor
        .entries()
        .iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect();
    json!({ "domain": key.domain, "entries": entries })
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Verb {
    /// The call that does it.
    fn call(&self) -> anyhow::Result<Call> {
        let post = |path: &str, body: Value| Call {
            method: "POST",
            path: format!("/admin{path}"),
            body: Some(body),
        };
        let get = |path: String| Call {
            method: "GET",
            path: format!("/admin{path}"),
            body: None,
        };
        Ok(match self {
            Verb::Rules => get("/rules".into()),
            Verb::Inspect(key) => post("/keys/inspect", key_body(key)),
            Verb::Peek(key) => post("/keys/peek", key_body(key)),
            Verb::Block { key, duration } => {
                let ms = millis(*duration);
                if ms == 0 {
                    bail!("--for: a block lasts at least 1ms");
                }
                let mut body = key_body(key);
                body["duration_ms"] = json!(ms);
                post("/keys/block", body)
            }
            Verb::Unblock(key) => post("/keys/unblock", key_body(key)),
            Verb::Reset(key) => post("/keys/reset", key_body(key)),
            Verb::Penalty { key, units } | Verb::Reward { key, units } => {
                let mut body = key_body(key);
                body["units"] = json!(units);
                let path = if matches!(self, Verb::Penalty { .. }) {
                    "/keys/penalty"
                } else {
                    "/keys/reward"
                };
                post(path, body)
            }
            Verb::Blocked { limit } => get(format!("/keys/blocked?limit={limit}")),
            Verb::TopDenied { limit } => get(format!("/top-denied?limit={limit}")),
            Verb::Reload => Call {
                method: "POST",
                path: "/admin/reload".into(),
                body: None,
            },
        })
    }

    /// The answer as text.
    fn render(&self, answer: &Value) -> String {
        match self {
            Verb::Rules => render::rules(answer),
            Verb::Inspect(_) => render::inspect(answer),
            Verb::Peek(_) | Verb::Penalty { .. } | Verb::Reward { .. } => render::decision(answer),
            Verb::Block { .. } => render::blocked_one(answer),
            Verb::Unblock(_) => render::done(answer, "unblocked: it may try again now"),
            Verb::Reset(_) => render::done(answer, "reset: usage, block and strikes forgotten"),
            Verb::Blocked { .. } => render::blocked_list(answer),
            Verb::TopDenied { .. } => render::top_denied(answer),
            Verb::Reload => render::reload(answer),
        }
    }
}

/// `host:port` of `--server`: `http://host:port`, with or without a trailing `/`, or bare.
pub(crate) fn address(server: &str) -> anyhow::Result<String> {
    let server = server.trim();
    if server.starts_with("https://") {
        bail!(
            "--server {server}: weir admin speaks plain HTTP only; reach an HTTPS listener \
             through a local tunnel or ask it with curl"
        );
    }
    let rest = server.strip_prefix("http://").unwrap_or(server);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() || rest.contains('/') || rest.contains("://") {
        bail!("--server {server}: expected http://HOST:PORT");
    }
    Ok(rest.to_string())
}

/// The token from `WEIR_ADMIN_TOKEN` or `--admin-token-file` (trimmed as the server trims
/// it), exactly one of them.
fn token(file: Option<&PathBuf>) -> anyhow::Result<String> {
    let from_env = std::env::var("WEIR_ADMIN_TOKEN")
        .ok()
        .filter(|t| !t.trim().is_empty());
    let text = match (file, from_env) {
        (Some(_), Some(_)) => {
            bail!("give the admin token once: --admin-token-file or WEIR_ADMIN_TOKEN, not both")
        }
        (Some(path), None) => std::fs::read_to_string(path)
            .with_context(|| format!("reading the admin token from {}", path.display()))?,
        (None, Some(token)) => token,
        (None, None) => bail!(
            "no admin token: set WEIR_ADMIN_TOKEN or give --admin-token-file PATH (the token \
             the server was started with)"
        ),
    };
    let text = text.trim().to_string();
    if text.is_empty() {
        bail!("the admin token file is empty");
    }
    Ok(text)
}

/// Runs `weir admin`.
pub(crate) fn admin(args: &AdminArgs) -> anyhow::Result<ExitCode> {
    let addr = address(&args.server)?;
    let call = args.verb.call()?;
    let token = token(args.admin_token_file.as_ref())?;
    let body = call.body.as_ref().map(Value::to_string);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let answer = runtime
        .block_on(weir_server::client::send(
            &addr,
            call.method,
            &call.path,
            body.as_deref(),
            Some(&token),
            args.timeout,
        ))
        .with_context(|| format!("asking the server at {addr}"))?;
    let parsed: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
    if !(200..300).contains(&answer.status) {
        return Err(refusal(answer.status, &parsed, &answer.body, &call.path));
    }
    if args.json {
        println!("{}", answer.body.trim_end());
    } else {
        print!("{}", args.verb.render(&parsed));
    }
    Ok(ExitCode::SUCCESS)
}

/// The error for a non-2xx answer, with the server's reason and, where it helps, what to do.
fn refusal(status: u16, parsed: &Value, raw: &str, path: &str) -> anyhow::Error {
    let reason = parsed["error"]
        .as_str()
        .map_or_else(|| raw.trim().to_string(), str::to_string);
    let hint = match status {
        401 => " (is the token the one the server was started with?)",
        404 if reason == "no such endpoint" => {
            " (the server has no admin API: start it with WEIR_ADMIN_TOKEN or \
             --admin-token-file, and point --server at its HTTP port)"
        }
        _ => "",
    };
    let mut message = format!("the server answered {status} to {path}: {reason}{hint}");
    if status == 422 && path == "/admin/reload" {
        if let Some(error) = parsed["error"].as_str() {
            message = format!("reload refused, the rules in force are kept: {error}");
        }
    }
    anyhow!(message)
}

#[cfg(test)]
mod tests {
    use super::address;

    #[test]
    fn the_server_address_takes_a_url_or_host_port() {
        assert_eq!(address("http://127.0.0.1:8080").unwrap(), "127.0.0.1:8080");
        assert_eq!(address("http://127.0.0.1:8080/").unwrap(), "127.0.0.1:8080");
        assert_eq!(address("10.0.0.5:9000").unwrap(), "10.0.0.5:9000");
        assert!(address("https://weir:8080")
            .unwrap_err()
            .to_string()
            .contains("plain HTTP only"));
        assert!(address("http://weir:8080/admin").is_err());
        assert!(address("").is_err());
    }
}
