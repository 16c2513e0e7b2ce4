//! The `weir` command. This file is only the entry point: it parses the command line with
//! clap and dispatches to a command, printing any error with its context. Today there is one
//! command, `simulate` (options and glue in `cli.rs`; the work in `traffic.rs`,
//! `simulate.rs`, `render.rs` and `svg.rs`, rule specs in `spec.rs`).

mod cli;
mod duration;
mod help;
mod render;
mod simulate;
mod spec;
mod svg;
mod traffic;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Rate limiting you can see before you ship it.
#[derive(Debug, Parser)]
#[command(
    name = "weir",
    version,
    long_about = "Rate limiting you can see before you ship it.\n\n\
        Weir limits how often a key (a user, an IP, an API token) may do something, with the \
        algorithm of your choice: fixed window, sliding log, sliding window counter, weighted \
        window, token bucket, leaky bucket (meter or queue) or GCRA. `weir simulate` replays \
        the same traffic through several rules on a simulated clock and shows, interval by \
        interval, what each one allowed and denied, so you can pick one before you deploy it.",
    after_help = help::WEIR
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The commands of `weir`.
#[derive(Debug, Subcommand)]
enum Command {
    /// Replay a traffic pattern through one or more rules and compare what each allows
    #[command(
        long_about = "Replay a traffic pattern through one or more rules and compare what each \
            allows.\n\n\
            Every rule sees the same requests, on a simulated clock (nothing sleeps), and keeps \
            its own state. The results are printed per --interval as allowed/denied for each \
            rule, with totals; --svg also draws them."
    )]
    Simulate(cli::SimulateArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Simulate(args) => cli::simulate(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
