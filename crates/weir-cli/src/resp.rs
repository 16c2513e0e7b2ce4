//! `weir serve --resp ADDR`: the Redis-protocol front end (`weir-resp`) on the same engine as
//! the HTTP and gRPC APIs: its limiter (so `CL.THROTTLE` and `THROTTLE` decide on whatever
//! `--store` names, behind the same guards, counted as `api="resp"`) and its decide path
//! on the rules in force (so `WEIR.CHECK` answers as `/v1/check` and follows every
//! reload), stopped by the same signal. Its options ([`RespArgs`]): the address, the
//! password, TLS, the longest window one `CL.THROTTLE` may set; the connection cap, the
//! time bounds and the shutdown grace are `weir serve`'s own, as on its other listeners.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context as _};
use clap::Args;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use weir_server::{AdminToken, App};

use crate::duration::parse_duration;
use crate::tls_files::tls_files;

/// The RESP front end's options of `weir serve`.
#[derive(Debug, Args)]
pub(crate) struct RespArgs {
    /// Also serve the Redis protocol here (CL.THROTTLE as redis-cell, THROTTLE as
    /// throttlecrab, WEIR.CHECK for the rule files; any Redis client, MULTI/EXEC pipelines
    /// included). Anyone who reaches it can spend and lock any key: keep it on loopback or
    /// a private network unless --resp-password-file or --resp-tls-client-ca guards it
    /// [default: off]
    #[arg(long = "resp", value_name = "ADDR", env = "WEIR_RESP")]
    pub(crate) addr: Option<SocketAddr>,

    /// A file holding the password RESP clients must give (AUTH PASSWORD, or redis-py's
    /// password=, ioredis's password:, redis://:PASSWORD@host) before any command but
    /// AUTH, HELLO, PING and QUIT (answered -NOAUTH until then). At least 16 bytes;
    /// surrounding whitespace is trimmed; compared in constant time, never logged; a wrong
    /// one is answered after 100 ms, one at a time [default: none]
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_RESP_PASSWORD_FILE",
        requires = "addr"
    )]
    resp_password_file: Option<PathBuf>,

    /// Serve RESP over TLS with this certificate chain (PEM; with --resp-tls-key;
    /// redis-cli --tls, rediss:// URLs)
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_RESP_TLS_CERT",
        requires_all = ["resp_tls_key", "addr"]
    )]
    resp_tls_cert: Option<PathBuf>,

    /// The RESP certificate's private key (PEM)
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_RESP_TLS_KEY",
        requires = "resp_tls_cert"
    )]
    resp_tls_key: Option<PathBuf>,

    /// Mutual TLS on RESP: clients must show a certificate from this CA (PEM)
    #[arg(
        long,
        value_name = "PATH",
        env = "WEIR_RESP_TLS_CLIENT_CA",
        requires = "resp_tls_cert"
    )]
    resp_tls_client_ca: Option<PathBuf>,

    /// The longest one CL.THROTTLE or THROTTLE may hold a key: (max_burst + 1) × period /
    /// count, the longest lockout a caller can set on any key; longer parameters are
    /// refused with an error (at most 10 years)
    #[arg(long, value_name = "DURATION", env = "WEIR_RESP_MAX_WINDOW", default_value = "1d",
          value_parser = parse_duration)]
    resp_max_window: Duration,
}

/// What `weir serve` needs to serve RESP, read and checked before anything listens.
pub(crate) struct Resp {
    pub(crate) addr: SocketAddr,
    password: Option<AdminToken>,
    tls: Option<weir_resp::TlsAcceptor>,
    max_window: Duration,
}

impl RespArgs {
    /// The front end to serve, if `--resp` was given: its password file read and its TLS
    /// files loaded (an unreadable or unusable one stops `weir serve` here).
    pub(crate) fn load(&self) -> anyhow::Result<Option<Resp>> {
        let Some(addr) = self.addr else {
            return Ok(None);
        };
        let password = match &self.resp_password_file {
            None => None,
            Some(path) => {
                let text = std::fs::read_to_string(path).with_context(|| {
                    format!("reading the RESP password from {}", path.display())
                })?;
                let len = text.trim().len();
                match AdminToken::new(&text) {
                    Ok(password) => Some(password),
                    Err(_) => bail!(
                        "--resp-password-file {}: the password is {len} bytes, below the \
                         minimum of {}",
                        path.display(),
                        AdminToken::MIN_LEN
                    ),
                }
            }
        };
        let tls = match (&self.resp_tls_cert, &self.resp_tls_key) {
            (Some(cert), Some(key)) => {
                let files = tls_files(cert, key, self.resp_tls_client_ca.as_deref(), None);
                Some(weir_listen::tls_acceptor(&files, &[]).context("RESP TLS")?)
            }
            _ => None,
        };
        if !addr.ip().is_loopback() && password.is_none() && self.resp_tls_client_ca.is_none() {
            tracing::warn!(
                resp = %addr,
                "the RESP listener is beyond loopback with neither --resp-password-file nor \
                 --resp-tls-client-ca: anyone who reaches it can spend and lock any key"
            );
        }
        Ok(Some(Resp {
            addr,
            password,
            tls,
            max_window: self.resp_max_window,
        }))
    }
}

/// Serves RESP on `listener` for `app`'s engine until `stop` completes, bounded as `app`'s
/// other listeners are (connection cap, body size, header read timeout for a command being
/// sent and for replies not being read, request timeout, shutdown grace).
pub(crate) fn spawn(
    listener: TcpListener,
    app: &App,
    resp: Resp,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(
            resp = %addr,
            password = resp.password.is_some(),
            tls = resp.tls.is_some(),
            "weir serve: RESP listening (CL.THROTTLE, THROTTLE, WEIR.CHECK)"
        );
    }
    let server = app.settings();
    let mut settings = weir_resp::Settings::default()
        .max_connections(server.max_connections.get())
        .max_request_bytes(server.max_body_bytes)
        .command_timeout(server.header_read_timeout)
        .write_timeout(server.header_read_timeout)
        .request_timeout(server.request_timeout)
        .shutdown_grace(server.shutdown_grace)
        .max_window(resp.max_window);
    if let Some(password) = resp.password {
        settings = settings.password(password);
    }
    if let Some(threads) = server.connection_threads.clone() {
        settings = settings.connection_threads(threads);
    }
    if let Some(acceptor) = resp.tls {
        let clock = app.engine().limiter().clock().clone();
        settings = settings.tls(weir_listen::Tls::new(acceptor, "RESP", clock));
    }
    tokio::spawn(weir_resp::serve(
        listener,
        app.engine().clone(),
        settings,
        stop,
    ))
}
