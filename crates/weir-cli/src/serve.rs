//! `weir serve` as a command: its own options (the listeners, the request timeout; the
//! engine's are in `engine_args.rs`, shared with `weir proxy`), and the glue that turns them
//! into `weir_server::Settings` and runs the server until SIGTERM or SIGINT. The server
//! itself is the `weir-server` crate.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use tokio::net::TcpListener;
use weir_server::Settings;

use crate::duration::parse_duration;
use crate::engine_args::{shutdown_signal, EngineArgs};
use crate::help;

/// Options of `weir serve`.
#[derive(Debug, Args)]
#[command(after_help = help::SERVE)]
pub(crate) struct ServeArgs {
    /// The HTTP API's address (/v1/check, /json, /healthz, /readyz, /metrics, /admin)
    #[arg(
        long,
        value_name = "ADDR",
        env = "WEIR_HTTP",
        default_value = "127.0.0.1:8080"
    )]
    http: SocketAddr,

    /// The Envoy rate limit gRPC API's address
    #[arg(
        long,
        value_name = "ADDR",
        env = "WEIR_GRPC",
        default_value = "127.0.0.1:8081"
    )]
    grpc: SocketAddr,

    /// The longest one request may take
    #[arg(long, value_name = "DURATION", env = "WEIR_REQUEST_TIMEOUT", default_value = "5s",
          value_parser = parse_duration)]
    request_timeout: Duration,

    #[command(flatten)]
    engine: EngineArgs,
}

impl ServeArgs {
    /// The server's settings; reads the admin token.
    fn settings(&self) -> anyhow::Result<Settings> {
        let mut settings = self.engine.settings()?;
        settings.request_timeout = self.request_timeout;
        Ok(settings)
    }
}

/// Runs `weir serve` until a signal stops it.
pub(crate) fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    args.engine.init_logs()?;
    let settings = args.settings()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")?;
    runtime.block_on(async {
        let http = TcpListener::bind(args.http)
            .await
            .with_context(|| format!("binding the HTTP address {}", args.http))?;
        let grpc = TcpListener::bind(args.grpc)
            .await
            .with_context(|| format!("binding the gRPC address {}", args.grpc))?;
        weir_server::run(settings, http, grpc, shutdown_signal())
            .await
            .context("weir serve")
    })
}
