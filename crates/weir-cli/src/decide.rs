//! `weir decide`: a small client that asks a running `weir serve` (its HTTP API,
//! `POST /v1/check`) for one decision and prints it. The exit status says the answer, for
//! scripts: 0 allowed, 2 over the limit, 1 an error (no server, a bad request).

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use serde_json::{json, Value};

use crate::duration::parse_duration;
use crate::help;

/// One descriptor given as `KEY=VALUE[,KEY=VALUE...]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DescriptorSpec(Vec<(String, String)>);

impl DescriptorSpec {
    /// The `(key, value)` entries, in order.
    pub(crate) fn entries(&self) -> &[(String, String)] {
        &self.0
    }
}

/// Parses `remote_address=10.0.0.1` or `plan=enterprise,user_id=42`.
pub(crate) fn parse_descriptor(text: &str) -> Result<DescriptorSpec, String> {
    let entries = text
        .split(',')
        .map(|entry| match entry.split_once('=') {
            Some((key, value)) if !key.is_empty() => Ok((key.to_string(), value.to_string())),
            _ => Err(format!("'{entry}' is not KEY=VALUE")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DescriptorSpec(entries))
}

/// Options of `weir decide`.
#[derive(Debug, Args)]
#[command(after_help = help::DECIDE)]
pub(crate) struct DecideArgs {
    /// The domain of the rules to ask about
    #[arg(long, value_name = "DOMAIN")]
    domain: String,

    /// One descriptor, as KEY=VALUE[,KEY=VALUE...]; repeat for several
    #[arg(long = "descriptor", short = 'd', value_name = "ENTRIES", required = true,
          value_parser = parse_descriptor)]
    descriptors: Vec<DescriptorSpec>,

    /// Units this request uses
    #[arg(long, value_name = "N", default_value_t = 1)]
    hits: u64,

    /// The server's HTTP address
    #[arg(
        long,
        value_name = "ADDR",
        env = "WEIR_SERVER",
        default_value = "127.0.0.1:8080"
    )]
    server: String,

    /// Print the server's JSON answer instead of a summary
    #[arg(long)]
    json: bool,

    /// Give up after this long
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    timeout: Duration,
}

impl DecideArgs {
    /// The `/v1/check` body.
    pub(crate) fn body(&self) -> Value {
        let descriptors: Vec<Value> = self
            .descriptors
            .iter()
            .map(|d| {
                let entries: Vec<Value> =
                    d.0.iter()
                        .map(|(k, v)| json!({"key": k, "value": v}))
                        .collect();
                json!({ "entries": entries })
            })
            .collect();
        json!({ "domain": self.domain, "descriptors": descriptors, "hits": self.hits })
    }
}

/// One line per descriptor: what the server decided.
pub(crate) fn summary(answer: &Value) -> String {
    let mut out = format!("{}\n", answer["overall_code"].as_str().unwrap_or("?"));
    let empty = Vec::new();
    for (i, d) in answer["descriptors"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .enumerate()
    {
        let rule = d["rule"].as_str().unwrap_or("(no rule)");
        let mut line = format!("  [{i}] {:<10} {rule}", d["code"].as_str().unwrap_or("?"));
        if d["unlimited"] == true {
            line.push_str(": unlimited");
        } else if let (Some(remaining), Some(limit)) =
            (d["remaining"].as_u64(), d["limit"].as_u64())
        {
            line.push_str(&format!(": {remaining} of {limit} left"));
            if let Some(retry) = d["retry_after_ms"].as_u64().filter(|&ms| ms > 0) {
                line.push_str(&format!(", retry in {retry} ms"));
            } else if let Some(reset) = d["reset_after_ms"].as_u64() {
                line.push_str(&format!(", full again in {reset} ms"));
            }
        }
        if d["shadow_denied"] == true {
            line.push_str(" (denial not enforced: shadow)");
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Runs `weir decide`.
pub(crate) fn decide(args: &DecideArgs) -> anyhow::Result<ExitCode> {
    let addr = args
        .server
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let body = args.body().to_string();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let answer = runtime
        .block_on(weir_server::client::send(
            &addr,
            "POST",
            "/v1/check",
            Some(&body),
            None,
            args.timeout,
        ))
        .with_context(|| format!("asking the server at {addr}"))?;
    let parsed: Value = serde_json::from_str(&answer.body).unwrap_or(Value::Null);
    if answer.status != 200 && answer.status != 429 {
        let reason = parsed["error"].as_str().unwrap_or(answer.body.trim());
        bail!("the server answered {}: {reason}", answer.status);
    }
    if args.json {
        println!("{}", answer.body);
    } else {
        print!("{}", summary(&parsed));
    }
    Ok(if answer.status == 429 {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}
