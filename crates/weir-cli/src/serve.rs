//! `weir serve` as a command: its own options (the listeners and their bounds, the request
//! timeout, Envoy's response headers; the engine's are in `engine_args.rs`, shared with
//! `weir proxy`), and the glue that turns them into `weir_server::Settings` and runs the
//! server until SIGTERM or SIGINT. envoyproxy/ratelimit's variables (`ratelimit_env/`)
//! fill what no flag or `WEIR_*` variable gave. The server itself is the `weir-server`
//! crate.

use std::net::SocketAddr;
use std::num::NonZeroUsize;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::{Args, ValueEnum};
use std::path::PathBuf;

use weir_server::{HeaderStyle, LegacyHeaders, ResponseHeaders, RuleSource, Settings, TlsVersion};

use crate::duration::parse_duration;
use crate::engine_args::{bind, run, shutdown_signal, EngineArgs, Fallbacks};
use crate::help;
use crate::ratelimit_env::{self, RatelimitEnv};
use crate::tls_files::tls_files;

/// Weir's default listeners (envoyproxy/ratelimit's variables may say otherwise).
const DEFAULT_HTTP: &str = "127.0.0.1:8080";
const DEFAULT_GRPC: &str = "127.0.0.1:8081";

/// Which headers Envoy is asked to add to its responses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum EnvoyHeaders {
    /// None (envoyproxy/ratelimit's default)
    None,
    /// envoyproxy/ratelimit's RateLimit-Limit, -Remaining and -Reset (names: --limit-header…)
    Ratelimit,
    /// IETF RateLimit-Policy and RateLimit
    Ietf,
    /// X-RateLimit-Limit, -Remaining and -Reset
    XRatelimit,
    /// IETF and X-RateLimit-*
    Both,
}

/// Options of `weir serve`.
#[derive(Debug, Args)]
#[command(after_help = help::SERVE)]
pub(crate) struct ServeArgs {
    /// The HTTP API's address (/v1/check, /json, /healthz, /readyz, /healthcheck, /metrics;
    /// /admin and /dashboard unless --admin-listen) [default: 127.0.0.1:8080, or ratelimit's
    /// HOST and PORT]
    #[arg(long, value_name = "ADDR", env = "WEIR_HTTP")]
    http: Option<SocketAddr>,

    /// Serve the admin API and the dashboard (and /healthz) on this address only, e.g. a
    /// loopback or management network, instead of on --http, which then answers 404 for
    /// them; the same admin token is required, and --http-tls-* apply here too. Needs an
    /// admin token [default: on --http]
    #[arg(long, value_name = "ADDR", env = "WEIR_ADMIN_LISTEN")]
    admin_listen: Option<SocketAddr>,

    /// The Envoy rate limit gRPC API's address (and grpc.health.v1.Health)
    /// [default: 127.0.0.1:8081, or ratelimit's GRPC_HOST and GRPC_PORT]
    #[arg(long, value_name = "ADDR", env = "WEIR_GRPC")]
    grpc: Option<SocketAddr>,

    /// Rate-limit headers Envoy is asked to add to its responses (gRPC and /json)
    /// [default: none, or ratelimit with LIMIT_RESPONSE_HEADERS_ENABLED=true]
    #[arg(long, value_enum, value_name = "KIND", env = "WEIR_GRPC_HEADERS")]
    grpc_headers: Option<EnvoyHeaders>,

    /// The name of --grpc-headers ratelimit's limit header [default: RateLimit-Limit, or
    /// LIMIT_LIMIT_HEADER]
    #[arg(long, value_name = "NAME", env = "WEIR_LIMIT_HEADER")]
    limit_header: Option<String>,

    /// The name of its remaining header [default: RateLimit-Remaining, or
    /// LIMIT_REMAINING_HEADER]
    #[arg(long, value_name = "NAME", env = "WEIR_LIMIT_REMAINING_HEADER")]
    limit_remaining_header: Option<String>,

    /// The name of its reset header [default: RateLimit-Reset, or LIMIT_RESET_HEADER]
    #[arg(long, value_name = "NAME", env = "WEIR_LIMIT_RESET_HEADER")]
    limit_reset_header: Option<String>,

    /// The share of a limit used past which an allowed decision counts as near the limit
    /// in metrics [default: 0.8, or NEAR_LIMIT_RATIO]
    #[arg(long, value_name = "RATIO", env = "WEIR_NEAR_LIMIT_RATIO")]
    near_limit_ratio: Option<f64>,

    /// The prefix of every key a network store writes; instances sharing limits use the
    /// same one [default: weir, or CACHE_KEY_PREFIX followed by weir]
    #[arg(long, value_name = "PREFIX", env = "WEIR_KEY_PREFIX")]
    key_prefix: Option<String>,

    /// Not ready (/readyz, /healthcheck, gRPC health) while the network store does not
    /// answer, even though each rule's failure policy decides meanwhile (ratelimit's
    /// REDIS_HEALTH_CHECK_ACTIVE_CONNECTION)
    #[arg(long, env = "WEIR_FALLBACK_NOT_READY")]
    fallback_not_ready: bool,

    /// Serve gRPC over TLS with this certificate chain (PEM; with --grpc-tls-key)
    /// [default: none, or GRPC_SERVER_TLS_CERT with GRPC_SERVER_USE_TLS=true]
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_GRPC_TLS_CERT",
        requires = "grpc_tls_key"
    )]
    grpc_tls_cert: Option<PathBuf>,

    /// The gRPC certificate's private key (PEM) [or GRPC_SERVER_TLS_KEY]
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_GRPC_TLS_KEY",
        requires = "grpc_tls_cert"
    )]
    grpc_tls_key: Option<PathBuf>,

    /// Mutual TLS on gRPC: clients must show a certificate from this CA (PEM)
    /// [or GRPC_CLIENT_TLS_CACERT]
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_GRPC_TLS_CLIENT_CA",
        requires = "grpc_tls_cert"
    )]
    grpc_tls_client_ca: Option<PathBuf>,

    /// With --grpc-tls-client-ca: client certificates must also be valid for this DNS name or
    /// IP address [or GRPC_CLIENT_TLS_SAN]
    #[arg(
        long,
        value_name = "NAME",
        env = "WEIR_GRPC_TLS_CLIENT_NAME",
        requires = "grpc_tls_client_ca"
    )]
    grpc_tls_client_name: Option<String>,

    /// Serve HTTP over TLS with this certificate chain (PEM; with --http-tls-key)
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_HTTP_TLS_CERT",
        requires = "http_tls_key"
    )]
    http_tls_cert: Option<PathBuf>,

    /// The HTTP certificate's private key (PEM)
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_HTTP_TLS_KEY",
        requires = "http_tls_cert"
    )]
    http_tls_key: Option<PathBuf>,

    /// Mutual TLS on HTTP: clients must show a certificate from this CA (PEM)
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_HTTP_TLS_CLIENT_CA",
        requires = "http_tls_cert"
    )]
    http_tls_client_ca: Option<PathBuf>,

    /// The oldest TLS version either TLS listener accepts: 1.2 (Envoy's default maximum
    /// towards upstreams is TLS 1.2) or 1.3 [default: 1.2]
    #[arg(long, value_name = "VERSION", env = "WEIR_TLS_MIN_VERSION", value_parser = ["1.2", "1.3"])]
    tls_min_version: Option<String>,

    /// Read none of envoyproxy/ratelimit's environment variables (REDIS_URL, PORT, …)
    #[arg(long, env = "WEIR_NO_RATELIMIT_ENV")]
    no_ratelimit_env: bool,

    /// The longest one request may take (an HTTP body still arriving then is a 408)
    #[arg(long, value_name = "DURATION", env = "WEIR_REQUEST_TIMEOUT", default_value = "5s",
          value_parser = parse_duration)]
    request_timeout: Duration,

    /// The most connections each listener (HTTP, gRPC, RESP) keeps open at once; at the cap a new
    /// connection is closed as soon as it is accepted, and the open ones keep being served
    /// (the process needs an open-files limit above this times the listeners, two or three
    /// with --resp: a start-up WARN says when `ulimit -n` is lower)
    #[arg(long, value_name = "N", env = "WEIR_MAX_CONNECTIONS",
          default_value_t = Settings::DEFAULT_MAX_CONNECTIONS)]
    max_connections: NonZeroUsize,

    /// How long a gRPC connection may go without a request in flight before it is closed
    /// (HTTP/2 GOAWAY; Envoy reconnects on its next request)
    #[arg(long, value_name = "DURATION", env = "WEIR_GRPC_IDLE_TIMEOUT", default_value = "5m",
          value_parser = parse_duration)]
    grpc_idle_timeout: Duration,

    #[command(flatten)]
    resp: crate::resp::RespArgs,

    #[command(flatten)]
    engine: EngineArgs,
}

impl ServeArgs {
    /// envoyproxy/ratelimit's variables from the process environment (none with
    /// `--no-ratelimit-env`).
    fn ratelimit_env(&self) -> anyhow::Result<RatelimitEnv> {
        if self.no_ratelimit_env {
            return Ok(RatelimitEnv::default());
        }
        ratelimit_env::read(&|name| std::env::var(name).ok())
            .context("envoyproxy/ratelimit's environment (--no-ratelimit-env to ignore it)")
    }

    /// The HTTP and gRPC addresses: the flag (or `WEIR_*`), else ratelimit's, else Weir's
    /// loopback defaults.
    fn listeners(&self, rl: &RatelimitEnv) -> anyhow::Result<(SocketAddr, SocketAddr)> {
        let http = self
            .http
            .or(rl.http)
            .map_or_else(|| DEFAULT_HTTP.parse(), Ok)?;
        let grpc = self
            .grpc
            .or(rl.grpc)
            .map_or_else(|| DEFAULT_GRPC.parse(), Ok)?;
        // HOST and PORT are generic names: say so loudly when they, not a flag, take a
        // listener off loopback (a developer's exported PORT would otherwise expose it).
        for (flag, chosen, from_env, vars) in [
            ("--http", self.http, rl.http, "HOST/PORT"),
            ("--grpc", self.grpc, rl.grpc, "GRPC_HOST/GRPC_PORT"),
        ] {
            if let (None, Some(addr)) = (chosen, from_env) {
                if !addr.ip().is_loopback() {
                    tracing::warn!(
                        %addr,
                        "listening beyond loopback because envoyproxy/ratelimit's {vars} are \
                         set; {flag} 127.0.0.1:PORT or --no-ratelimit-env keeps it local"
                    );
                }
            }
        }
        Ok((http, grpc))
    }

    /// What the engine takes from ratelimit's variables.
    fn fallbacks(rl: &RatelimitEnv) -> Fallbacks {
        Fallbacks {
            rules: rule_source(rl),
            store: rl
                .store
                .clone()
                .map(|url| (url, "the store of REDIS_* / MEMCACHE_HOST_PORT")),
            store_timeout: rl.store_timeout,
            shadow: rl.shadow,
            log: rl.log.clone(),
            log_format: rl.log_format,
        }
    }

    /// The server's settings; reads the admin token.
    fn settings(&self, rl: &RatelimitEnv) -> anyhow::Result<Settings> {
        let mut settings = self.engine.settings_or(&Self::fallbacks(rl))?;
        settings.request_timeout = self.request_timeout;
        settings.max_connections = self.max_connections;
        settings.grpc_idle_timeout = self.grpc_idle_timeout;
        settings.envoy_headers = self.envoy_headers(rl)?;
        let ratio = self.near_limit_ratio.or(rl.near_limit_ratio).unwrap_or(0.8);
        if !(0.0..=1.0).contains(&ratio) {
            bail!("--near-limit-ratio {ratio}: must be from 0 to 1");
        }
        settings.engine.near_limit_ratio = ratio;
        settings.engine.key_prefix = match (&self.key_prefix, &rl.key_prefix) {
            (Some(prefix), _) => Some(prefix.clone()),
            (None, Some(prefix)) => Some(format!("{prefix}weir")),
            (None, None) => None,
        };
        settings.engine.redis_batch_wait = self.engine.redis_batch_wait.or(rl.redis_batch_wait);
        settings.engine.statsd = rl.statsd.clone();
        settings.engine.ready_needs_rules = rl.ready_needs_rules;
        settings.engine.ready_in_fallback = !(self.fallback_not_ready
            || (std::env::var_os("WEIR_FALLBACK_NOT_READY").is_none() && rl.fallback_not_ready));
        settings.grpc_tls = match (&self.grpc_tls_cert, &self.grpc_tls_key, &rl.grpc_tls) {
            (Some(cert), Some(key), _) => Some(tls_files(
                cert,
                key,
                self.grpc_tls_client_ca.as_deref(),
                self.grpc_tls_client_name.as_deref(),
            )),
            (None, None, Some(files)) => Some(tls_files(
                &files.cert,
                &files.key,
                files.client_ca.as_deref(),
                files.client_name.as_deref(),
            )),
            _ => None,
        };
        settings.http_tls = match (&self.http_tls_cert, &self.http_tls_key) {
            (Some(cert), Some(key)) => Some(tls_files(
                cert,
                key,
                self.http_tls_client_ca.as_deref(),
                None,
            )),
            _ => None,
        };
        let min = match self.tls_min_version.as_deref() {
            Some("1.3") => TlsVersion::Tls13,
            _ => TlsVersion::Tls12,
        };
        for files in [&mut settings.grpc_tls, &mut settings.listen.http_tls] {
            *files = files.take().map(|f| f.min_version(min));
        }
        Ok(settings)
    }

    fn envoy_headers(&self, rl: &RatelimitEnv) -> anyhow::Result<ResponseHeaders> {
        let Some(kind) = self.grpc_headers else {
            return Ok(rl.envoy_headers.clone().unwrap_or_default());
        };
        let style = |ietf, x_ratelimit| HeaderStyle { ietf, x_ratelimit };
        let from_env = rl.envoy_headers.as_ref().and_then(|h| h.legacy.clone());
        let defaults = from_env.unwrap_or_default();
        Ok(match kind {
            EnvoyHeaders::None => ResponseHeaders::NONE,
            EnvoyHeaders::Ratelimit => ResponseHeaders {
                legacy: Some(
                    LegacyHeaders::new(
                        self.limit_header.as_deref().unwrap_or(defaults.limit()),
                        self.limit_remaining_header
                            .as_deref()
                            .unwrap_or(defaults.remaining()),
                        self.limit_reset_header
                            .as_deref()
                            .unwrap_or(defaults.reset()),
                    )
                    .context("--limit-header")?,
                ),
                ..ResponseHeaders::NONE
            },
            EnvoyHeaders::Ietf => ResponseHeaders {
                style: style(true, false),
                legacy: None,
            },
            EnvoyHeaders::XRatelimit => ResponseHeaders {
                style: style(false, true),
                legacy: None,
            },
            EnvoyHeaders::Both => ResponseHeaders {
                style: style(true, true),
                legacy: None,
            },
        })
    }
}

/// The rules ratelimit's variables point at: its xDS server (`CONFIG_TYPE=GRPC_XDS_SOTW`)
/// or its runtime directory (`weir check-config` asks the same).
pub(crate) fn rule_source(rl: &RatelimitEnv) -> Option<RuleSource> {
    if let Some(xds) = &rl.xds {
        return Some(RuleSource::Xds {
            server: xds.server.clone(),
        });
    }
    rl.rules.as_ref().map(|r| RuleSource::Runtime {
        dir: r.dir.clone(),
        ignore_dotfiles: r.ignore_dotfiles,
        merge_domains: r.merge_domains,
    })
}

/// Runs `weir serve` until a signal stops it.
pub(crate) fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let rl = args.ratelimit_env()?;
    args.engine.init_logs_or(&ServeArgs::fallbacks(&rl))?;
    rl.report();
    let mut settings = args.settings(&rl)?;
    let (http_addr, grpc_addr) = args.listeners(&rl)?;
    if args.admin_listen.is_some() && settings.admin_token.is_none() {
        bail!(
            "--admin-listen serves the admin API, which needs a token: set WEIR_ADMIN_TOKEN or \
             --admin-token-file"
        );
    }
    let resp_front = args.resp.load()?;
    settings.other_listeners = usize::from(resp_front.is_some()) + usize::from(rl.debug.is_some());
    settings.connection_threads = args.engine.connection_threads()?;
    let admin_addr = args.admin_listen;
    let debug_addr = rl.debug;
    if let Some(addr) = debug_addr.filter(|a| !a.ip().is_loopback()) {
        tracing::warn!(%addr, "the debug listener (/rlconfig: the rules in force) listens beyond loopback because envoyproxy/ratelimit's DEBUG_HOST/DEBUG_PORT are set");
    }
    // Rules from xDS (unless a flag chose files): a client puts each update in force.
    let xds = rl
        .xds
        .clone()
        .filter(|_| matches!(settings.engine.rules, RuleSource::Xds { .. }));
    run(async {
        // Installed first: a SIGTERM while waiting for xDS, or right after the RESP listener
        // says it listens, stops the process cleanly (one run in 4 of tests/serve.rs
        // serve_answers_the_redis_protocol_with_resp was killed when it came later).
        let mut signal = Box::pin(shutdown_signal());
        let mut xds_task = None;
        let mut opened = None;
        if let Some(xds) = xds {
            let app = weir_server::App::new(settings.clone())
                .await
                .context("weir serve")?;
            let (task, mut first) = ratelimit_env::spawn_xds(xds.clone(), app.engine().clone());
            xds_task = Some(task);
            // As ratelimit (unless FORCE_START_WITHOUT_INITIAL_CONFIG): nothing listens
            // before the first update is in force, so no request is answered without rules.
            if !xds.force_start {
                tracing::info!(server = %xds.server, "waiting for the first rate limit configuration from the xDS management server before listening");
                tokio::select! {
                    _ = first.wait_for(|in_force| *in_force) => {}
                    () = &mut signal => return Ok(()),
                }
            }
            opened = Some(app);
        }
        let http = bind(http_addr, "HTTP").await?;
        let grpc = bind(grpc_addr, "gRPC").await?;
        let mut listeners = weir_server::Listeners::new(http, grpc);
        if let Some(addr) = admin_addr {
            listeners = listeners.with_admin(bind(addr, "admin").await?);
        }
        let resp = match resp_front {
            Some(front) => Some((bind(front.addr, "RESP").await?, front)),
            None => None,
        };
        let app = match opened {
            Some(app) => app,
            None => weir_server::App::new(settings)
                .await
                .context("weir serve")?,
        };
        // One signal stops every listener: the HTTP and gRPC ones through serve's
        // shutdown, the RESP one through this channel (also when serve ends on its own).
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let resp_task = resp.map(|(listener, front)| {
            let mut stopped = stopped.clone();
            crate::resp::spawn(listener, &app, front, async move {
                let _ = stopped.wait_for(|stop| *stop).await;
            })
        });
        let engine = app.engine().clone();
        let debug_task = match debug_addr {
            Some(addr) => {
                let mut stopped = stopped.clone();
                let stop = async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                };
                Some(crate::debug_port::spawn(
                    bind(addr, "debug").await?,
                    engine.clone(),
                    stop,
                ))
            }
            None => None,
        };
        let served = weir_server::serve_on(app, listeners, async move {
            signal.await;
            let _ = stop.send(true);
        })
        .await;
        if let Some(task) = xds_task {
            task.abort();
        }
        if let Some(task) = debug_task {
            let _ = task.await;
        }
        if let Some(task) = resp_task {
            let _ = task.await;
            // serve saved the state file once its listeners drained; RESP commands may
            // have decided until the RESP listener stopped just now: save once more.
            let _ = engine.save_state().await;
        }
        served.context("weir serve")
    })
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
