//! The `weir` command. This file is only the entry point: it parses the command line with
//! clap and dispatches to a command, printing any error with its context. The commands:
//! `simulate` (options and glue in `simulate_command.rs`; the work in `traffic.rs`, `simulate.rs`,
//! `render.rs` and `svg.rs`, rule specs in `spec.rs`), `serve` (`serve.rs`, over the
//! `weir-server` crate), `proxy` (`proxy.rs`, over the `weir-proxy` crate; the options it
//! shares with `serve` are in `engine_args.rs`), `check-config` (`check_config.rs`), `decide`
//! (`decide.rs`) and `admin` (`admin.rs`, its output in `admin_render.rs`).

mod admin;
mod admin_render;
mod check_config;
mod debug_port;
mod decide;
mod duration;
mod engine_args;
mod help;
mod in_flight_args;
mod proxy;
mod proxy_breaker;
mod ratelimit_env;
mod render;
mod resp;
mod serve;
mod simulate;
mod simulate_backend;
mod simulate_command;
mod spec;
mod svg;
mod tls_files;
mod traffic;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The program's allocator: mimalloc (per-thread free lists), not glibc's malloc, whose
/// malloc and free took about 7k of the 58k instructions of a request through `weir
/// proxy` (callgrind; BENCHMARKS.md, "Instructions a request"). The libraries leave the
/// choice to the program that embeds them.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Rate limiting you can see before you ship it, and serve.
#[derive(Debug, Parser)]
#[command(
    name = "weir",
    version,
    long_about = "Rate limiting you can see before you ship it.\n\n\
        Weir limits how often a key (a user, an IP, an API token) may do something, with the \
        algorithm of your choice: fixed window, sliding log, sliding window counter, weighted \
        window, token bucket, leaky bucket (meter or queue) or GCRA. `weir serve` answers \
        rate-limit decisions over HTTP and Envoy's rate limit gRPC API, from YAML rules \
        (envoyproxy/ratelimit's format included). `weir proxy` stands in front of a backend \
        and applies the same rules before forwarding. `weir simulate` replays \
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
    Simulate(simulate_command::SimulateArgs),

    /// Serve decisions: HTTP/JSON and Envoy's rate limit gRPC API over YAML rules
    #[command(
        long_about = "Serve decisions: HTTP/JSON and Envoy's rate limit gRPC API over YAML rules.\n\n\
            A drop-in for envoyproxy/ratelimit (same gRPC API, same YAML, same answers) that \
            also runs every Weir algorithm. Rules reload when their files change (a bad file \
            keeps the rules in force). Stops gracefully on SIGTERM or SIGINT. Every option \
            can also be set by its WEIR_* environment variable."
    )]
    Serve(Box<serve::ServeArgs>),

    /// Protect a backend: a reverse proxy that applies the rules before forwarding
    #[command(
        long_about = "Protect a backend: a reverse proxy that applies the rules before forwarding.\n\n\
            Per-client and global limits, request classes (known crawlers, or any header) with \
            their own limits and upstream, an in-flight limit towards the backend (a number, or \
            auto: found by measuring its latency), a circuit breaker per upstream (--breaker), \
            and at the limit a 429, a wait in a bounded queue, or a fallback upstream. Streams \
            bodies, keeps upstream connections alive, answers upstream failures with 502 / 504. \
            Metrics, the admin API and the dashboard are weir serve's, on --api. Every option \
            can also be set by its WEIR_* environment variable."
    )]
    Proxy(Box<proxy::ProxyArgs>),
    /// Check a rule file or directory and list its rules
    CheckConfig(check_config::CheckConfigArgs),

    /// Ask a running `weir serve` for one decision (exit 0 allowed, 2 over the limit)
    Decide(decide::DecideArgs),

    /// Operate a running server: rules, inspect, peek, block, unblock, reset, penalty,
    /// reward, blocked, top-denied, reload
    #[command(
        long_about = "Operate a running weir serve or weir proxy through its admin API.\n\n\
            Reads the admin token from WEIR_ADMIN_TOKEN or --admin-token-file (never from a \
            flag's value: `ps` shows those). A key is named as a decision names it: a domain \
            and one descriptor (--domain api -d user=alice); the verb applies under the rule \
            that descriptor matches. Exit status: 0 done, 1 an error (no server, refused, no \
            rule matches: the server's reason is printed), 2 a usage error."
    )]
    Admin(admin::AdminArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Simulate(args) => simulate_command::simulate(&args).map(|()| ExitCode::SUCCESS),
        Command::Serve(args) => serve::serve(&args).map(|()| ExitCode::SUCCESS),
        Command::Proxy(args) => proxy::proxy(&args).map(|()| ExitCode::SUCCESS),
        Command::CheckConfig(args) => check_config::check_config(&args).map(|()| ExitCode::SUCCESS),
        Command::Decide(args) => decide::decide(&args),
        Command::Admin(args) => admin::admin(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
