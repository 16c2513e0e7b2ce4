//! Running a server: [`run`] builds the [`App`] and [`serve`] drives it on two bound
//! listeners (HTTP: `http/listener.rs`, gRPC: `grpc_listener.rs`, each within its
//! connection cap and idle bounds) until `shutdown` completes, then stops accepting, lets
//! in-flight requests finish (up to `shutdown_grace`) and returns. Background work rides
//! along: the memory store sweep and the rule watcher.

use std::future::Future;
use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use weir_core::Clock;

use crate::app::App;
use crate::error::ServerError;
use crate::grpc_listener::serve_grpc;
use crate::settings::Settings;
use crate::{http, reload};

/// Builds a server from `settings` and serves it on `http` and `grpc` until `shutdown`
/// completes. Tests bind `127.0.0.1:0` and pass the listeners.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use tokio::net::TcpListener;
/// let http = TcpListener::bind("127.0.0.1:8080").await?;
/// let grpc = TcpListener::bind("127.0.0.1:8081").await?;
/// let ctrl_c = async { let _ = tokio::signal::ctrl_c().await; };
/// weir_server::run(weir_server::Settings::default(), http, grpc, ctrl_c).await?;
/// # Ok(()) }
/// ```
pub async fn run(
    settings: Settings,
    http: TcpListener,
    grpc: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let app = App::new(settings).await?;
    serve(app, http, grpc, shutdown).await
}

async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|stop| *stop).await;
}

/// Serves an already built `app` (see [`run`]).
pub async fn serve(
    app: App,
    http: TcpListener,
    grpc: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let settings = app.settings().clone();
    let tls = |files: &Option<crate::tls::TlsFiles>, listener, alpn: &[&[u8]]| {
        files
            .as_ref()
            .map(|files| crate::tls::acceptor(files, alpn))
            .transpose()
            .map_err(|error| ServerError::Tls { listener, error })
    };
    let grpc_tls = tls(&settings.grpc_tls, "gRPC", &[b"h2"])?;
    let http_tls = tls(&settings.http_tls, "HTTP", &[b"http/1.1"])?;
    let (stop_tx, stop_rx) = watch::channel(false);
    let background = spawn_background(&app);

    tracing::info!(
        http = %http.local_addr().map_err(ServerError::Http)?,
        grpc = %grpc.local_addr().map_err(ServerError::Http)?,
        store = %settings.store,
        rules = %app.config_status().source,
        shadow = settings.shadow,
        admin = settings.admin_token.is_some(),
        grpc_tls = grpc_tls.is_some(),
        http_tls = http_tls.is_some(),
        "weir serve: listening"
    );
    crate::accept::warn_if_files_run_short(2, settings.max_connections);

    let router = http::router(app.clone());
    let mut http_task = tokio::spawn(http::serve_http_tls(
        http,
        router,
        http::HttpLimits::of(&settings),
        http::Peer::Unrecorded,
        http_tls,
        stopped(stop_rx.clone()),
    ));
    let mut grpc_task = tokio::spawn(serve_grpc(grpc, app.clone(), grpc_tls, stopped(stop_rx)));

    let early = tokio::select! {
        () = shutdown => None,
        r = &mut http_task => Some(match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServerError::Http(e)),
            Err(join) => Err(ServerError::Http(std::io::Error::other(join.to_string()))),
        }),
        r = &mut grpc_task => Some(match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ServerError::Grpc(e)),
            Err(join) => Err(ServerError::Grpc(std::io::Error::other(join.to_string()))),
        }),
    };
    tracing::info!("weir serve: shutting down, finishing in-flight requests");
    app.start_draining();
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(settings.shutdown_grace, async {
        let _ = (&mut http_task).await;
        let _ = (&mut grpc_task).await;
    })
    .await;
    if drained.is_err() {
        tracing::warn!(grace = ?settings.shutdown_grace, "in-flight requests still running after the grace period; stopping");
        http_task.abort();
        grpc_task.abort();
    }
    for task in background {
        task.abort();
    }
    tracing::info!("weir serve: stopped");
    early.unwrap_or(Ok(()))
}

/// Starts what a running server does besides answering: the rule files' watch and poll,
/// and the memory store's sweep. `weir proxy` runs the same. Abort the handles to stop.
pub fn spawn_background(app: &App) -> Vec<JoinHandle<()>> {
    [
        spawn_sweeper(app),
        reload::spawn(Arc::clone(app.rule_book()), app.settings().reload),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Sweeps expired keys out of the memory store every `sweep_interval`.
fn spawn_sweeper(app: &App) -> Option<JoinHandle<()>> {
    app.engine().limiter().store().memory()?;
    let app = app.clone();
    let every = app
        .settings()
        .sweep_interval
        .max(std::time::Duration::from_millis(10));
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let limiter = app.engine().limiter();
            if let Some(memory) = limiter.store().memory() {
                let swept = memory.sweep(limiter.clock().now_ns());
                if swept > 0 {
                    tracing::debug!(swept, "memory store swept");
                }
            }
        }
    }))
}
