//! Running a server: [`run`] builds the [`App`] and [`serve`] drives it on two bound
//! listeners (HTTP: `http/listener.rs`, gRPC: `grpc_listener.rs`, each within its
//! connection cap and idle bounds), or [`serve_on`] on [`Listeners`] that may give the
//! admin API and the dashboard a listener of their own until `shutdown` completes, then stops accepting, lets
//! in-flight requests finish (up to `shutdown_grace`) and returns. The engine's background
//! work rides along: the memory store sweep and the rule watcher.

use std::future::Future;

use axum::Router;
use tokio::net::TcpListener;
use weir_core::Clock as _;
use weir_engine::Lifecycle;
use weir_listen::{routes, serve_http_tls, HttpLimits, NoDirect, Part, Peer, Tls, TlsFiles};

use crate::app::App;
use crate::error::ServerError;
use crate::grpc_listener::serve_grpc;
use crate::http::{decision_routes, Decisions};
use crate::settings::Settings;

/// `weir serve`'s whole HTTP API on one listener, ready for `oneshot`: the decision routes
/// ([`decision_routes`]) and the operations and admin API every Weir program serves
/// (`weir_listen::router`), under the same bounds.
pub fn router(app: App) -> Router {
    routes(app.listen().clone(), Part::All, Some(decision_routes(app)))
}

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
    serve_on(app, Listeners::new(http, grpc), shutdown).await
}

/// The bound listeners of one server: HTTP, gRPC and, when the admin API and the dashboard
/// have their own, the admin listener.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use tokio::net::TcpListener;
/// use weir_server::{AdminToken, Listeners, Settings};
///
/// let mut settings = Settings::default();
/// settings.admin_token = Some(AdminToken::new("a long random secret")?);
/// let listeners = Listeners::new(
///     TcpListener::bind("0.0.0.0:8080").await?,   // decisions, health, metrics
///     TcpListener::bind("0.0.0.0:8081").await?,   // Envoy's gRPC API
/// )
/// .with_admin(TcpListener::bind("127.0.0.1:9090").await?); // admin API, dashboard
/// let app = weir_server::App::new(settings).await?;
/// weir_server::serve_on(app, listeners, std::future::pending()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct Listeners {
    /// The HTTP API: decisions, health, metrics, and the admin API and the dashboard unless
    /// `admin` is given.
    pub http: TcpListener,
    /// Envoy's rate limit gRPC API and gRPC health.
    pub grpc: TcpListener,
    /// The admin API's and the dashboard's own listener (and `/healthz`), with the HTTP
    /// listener's TLS; `None`: they are on `http`. Needs an admin token.
    pub admin: Option<TcpListener>,
}

impl Listeners {
    /// HTTP and gRPC; the admin API (if any) on the HTTP listener.
    pub fn new(http: TcpListener, grpc: TcpListener) -> Self {
        Self {
            http,
            grpc,
            admin: None,
        }
    }

    /// The admin API and the dashboard on `admin`, and no longer on the HTTP listener.
    pub fn with_admin(mut self, admin: TcpListener) -> Self {
        self.admin = Some(admin);
        self
    }
}

/// Serves an already built `app` on `listeners` until `shutdown` completes (see [`run`]).
/// An admin listener without an admin token is refused: it would serve nothing.
pub async fn serve_on(
    app: App,
    listeners: Listeners,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServerError> {
    let Listeners { http, grpc, admin } = listeners;
    let settings = app.settings().clone();
    if admin.is_some() && settings.admin_token.is_none() {
        return Err(ServerError::AdminWithoutToken);
    }
    let clock = app.engine().limiter().clock().clone();
    let tls =
        |files: &Option<TlsFiles>, listener, alpn: &[&[u8]]| -> Result<Option<Tls>, ServerError> {
            let Some(files) = files else {
                return Ok(None);
            };
            let acceptor = weir_listen::tls_acceptor(files, alpn)
                .map_err(|error| ServerError::Tls { listener, error })?;
            weir_listen::warn_if_expiring(files, listener, clock.now_ns());
            Ok(Some(Tls::new(acceptor, listener, clock.clone())))
        };
    let grpc_tls = tls(&settings.grpc_tls, "gRPC", &[b"h2"])?;
    let http_tls = tls(&settings.http_tls, "HTTP", &[b"http/1.1"])?;
    let admin_tls = match &admin {
        Some(_) => tls(&settings.http_tls, "admin", &[b"http/1.1"])?,
        None => None,
    };
    let lifecycle = Lifecycle::new();
    let background = app.engine().spawn_background();

    let admin_listener = match &admin {
        Some(admin) => admin.local_addr().map_err(ServerError::Http)?.to_string(),
        None => "the HTTP listener".to_string(),
    };
    // Before "listening", so whoever waits for that line has seen it: HTTP, gRPC, the
    // admin API's own listener, and the front ends' beside them (RESP).
    weir_listen::warn_if_files_run_short(
        (2 + usize::from(admin.is_some())).saturating_add(settings.other_listeners),
        settings.max_connections,
    );
    tracing::info!(
        http = %http.local_addr().map_err(ServerError::Http)?,
        grpc = %grpc.local_addr().map_err(ServerError::Http)?,
        admin_listener,
        store = %settings.engine.store,
        rules = %app.engine().config_status().source,
        shadow = settings.engine.shadow,
        admin = settings.admin_token.is_some(),
        grpc_tls = settings.grpc_tls.is_some(),
        http_tls = settings.http_tls.is_some(),
        "weir serve: listening"
    );

    let limits = HttpLimits::of(&settings);
    let public = if admin.is_some() {
        Part::Public
    } else {
        Part::All
    };
    let http_served = serve_http_tls(
        http,
        routes(
            app.listen().clone(),
            public,
            Some(decision_routes(app.clone())),
        ),
        Decisions(app.clone()),
        limits.clone(),
        Peer::Unrecorded,
        http_tls,
        lifecycle.stopped(),
    );
    let admin_served = admin.map(|admin| {
        serve_http_tls(
            admin,
            routes(app.listen().clone(), Part::Admin, None),
            NoDirect,
            limits,
            Peer::Unrecorded,
            admin_tls,
            lifecycle.stopped(),
        )
    });
    // The admin listener rides with the HTTP one: either failing stops the server.
    let http_task = tokio::spawn(async move {
        match admin_served {
            None => http_served.await,
            Some(admin_served) => tokio::try_join!(http_served, admin_served).map(drop),
        }
    });
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
