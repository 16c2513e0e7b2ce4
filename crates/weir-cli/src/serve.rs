//! `weir serve` as a command: its own options (the listeners and their bounds, the request
//! timeout; the engine's are in `engine_args.rs`, shared with `weir proxy`), and the glue
//! that turns them into `weir_server::Settings` and runs the server until SIGTERM or
//! SIGINT. The server itself is the `weir-server` crate.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use weir_server::Settings;

use crate::duration::parse_duration;
use crate::engine_args::{bind, run, shutdown_signal, EngineArgs};
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

    /// The longest one request may take (an HTTP body still arriving then is a 408)
    #[arg(long, value_name = "DURATION", env = "WEIR_REQUEST_TIMEOUT", default_value = "5s",
          value_parser = parse_duration)]
    request_timeout: Duration,

    /// The most connections each listener (HTTP, gRPC) keeps open at once; at the cap a new
    /// connection is closed as soon as it is accepted, and the open ones keep being served
    /// (the process needs an open-files limit above twice this: a start-up WARN says when
    /// `ulimit -n` is lower)
    #[arg(long, value_name = "N", env = "WEIR_MAX_CONNECTIONS",
          default_value_t = Settings::DEFAULT_MAX_CONNECTIONS)]
    max_connections: NonZeroUsize,

    /// How long a gRPC connection may go without a request in flight before it is closed
    /// (HTTP/2 GOAWAY; Envoy reconnects on its next request)
    #[arg(long, value_name = "DURATION", env = "WEIR_GRPC_IDLE_TIMEOUT", default_value = "5m",
          value_parser = parse_duration)]
    grpc_idle_timeout: Duration,

    #[command(flatten)]
    engine: EngineArgs,
}

impl ServeArgs {
    /// The server's settings; reads the admin token.
    fn settings(&self) -> anyhow::Result<Settings> {
        let mut settings = self.engine.settings()?;
        settings.request_timeout = self.request_timeout;
        settings.max_connections = self.max_connections;
        settings.grpc_idle_timeout = self.grpc_idle_timeout;
        Ok(settings)
    }
}

/// Runs `weir serve` until a signal stops it.
pub(crate) fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    args.engine.init_logs()?;
    let settings = args.settings()?;
    run(async {
        let http = bind(args.http, "HTTP").await?;
        let grpc = bind(args.grpc, "gRPC").await?;
        weir_server::run(settings, http, grpc, shutdown_signal())
            .await
            .context("weir serve")
    })
}
