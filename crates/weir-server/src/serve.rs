//! Running a server: [`run`] builds the [`App`] and [`serve`] drives it on two bound
//! listeners (HTTP: `http/listener.rs`, gRPC: `grpc_listener.rs`, each within its
//! connection cap and idle bounds) until `shutdown` completes, then stops accepting, lets
//! in-flight requests finish (up to `shutdown_grace`) and returns. The engine's background
//! work rides along: the memory store sweep and the rule watcher.

use std::future::Future;

use tokio::net::TcpListener;
use weir_engine::Lifecycle;

use crate::app::App;
use crate::error::ServerError;
use crate::grpc_listener::serve_grpc;
use crate::http;
use crate::settings::Settings;

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
    let lifecycle = Lifecycle::new();
    let background = app.engine().spawn_background();

    // Before "listening", so whoever waits for that line has seen it.
    crate::accept::warn_if_files_run_short(
        2usize.saturating_add(settings.other_listeners),
        settings.max_connections,
    );
    tracing::info!(
        http = %http.local_addr().map_err(ServerError::Http)?,
        grpc = %grpc.local_addr().map_err(ServerError::Http)?,
        store = %settings.engine.store,
        rules = %app.engine().config_status().source,
        shadow = settings.engine.shadow,
        admin = settings.admin_token.is_some(),
        grpc_tls = grpc_tls.is_some(),
        http_tls = http_tls.is_some(),
        "weir serve: listening"
    );

    let router = http::router(app.clone());
    let http_task = tokio::spawn(http::serve_http_tls(
        http,
        router,
        settings.decision_api.then(|| app.clone()),
        http::HttpLimits::of(&settings),
        http::Peer::Unrecorded,
        http_tls,
        lifecycle.stopped(),
    ));
    let grpc_task = tokio::spawn(serve_grpc(grpc, app.clone(), grpc_tls, lifecycle.stopped()));
    let early = lifecycle
        .run(
            "weir serve",
            [http_task, grpc_task],
            shutdown,
            settings.shutdown_grace,
            || app.engine().start_draining(),
            background,
        )
        .await;
    // The memory store's state file, once more now that nothing decides any longer.
    let _ = app.engine().save_state().await;
    match early {
        Some((0, Err(e))) => Err(ServerError::Http(e)),
        Some((_, Err(e))) => Err(ServerError::Grpc(e)),
        _ => Ok(()),
    }
}
