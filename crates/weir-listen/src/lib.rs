//! # weir-listen
//!
//! What every Weir program that listens shares, over the one decision engine
//! ([`weir_engine::Engine`]): `weir serve` (HTTP, gRPC), `weir proxy` (its proxy and API
//! listeners) and the Redis-protocol front end (`weir-resp`) accept connections, bound them
//! and speak TLS here, and serve the same operations and admin API.
//!
//! - **The accept loop** (`accept.rs`): a connection cap per listener, graceful close on
//!   shutdown or when idle ([`accept_loop`], [`drive`], [`Activity`]), and the start-up
//!   warning when the open-files limit is below the caps ([`warn_if_files_run_short`]).
//! - **Connection threads** (`threads.rs`): one single-threaded runtime a CPU, each
//!   serving the connections handed to it from accept to close ([`ConnectionThreads`];
//!   `weir serve` and `weir proxy` start them, `--connection-threads`).
//! - **HTTP listeners** (`http/listener.rs`): hyper's HTTP/1 server on that loop, with a
//!   header-read timeout on the connection's own timer and a head size ([`HttpLimits`]);
//!   a router ([`serve_http_with`]), any tower service ([`serve_service_with`], `weir
//!   proxy`'s listener), or a router behind the program's own hot paths ([`Direct`],
//!   [`serve_http_tls`]).
//! - **TLS** (`tls.rs`): rustls acceptors from PEM files, mutual TLS, a minimum version
//!   ([`TlsFiles`], [`TlsVersion`], [`tls_acceptor`], [`Tls`], [`tls_handshake`]).
//! - **The admin token** ([`AdminToken`]): a redacted secret compared in constant time
//!   (the admin API's token, the RESP password).
//! - **The operations and admin API** (`http/`): `/healthz`, `/readyz`, `/healthcheck`,
//!   `/metrics`, and with a token the admin API under `/admin` and the dashboard
//!   ([`router`], [`routes`]); a program adds its own routes under the same bounds
//!   (`weir_server::decision_routes`).
//!
//! Not here: what a request decides (the engine), the decision APIs (`weir-server`), the
//! proxy's forwarding (`weir-proxy`), the Redis protocol (`weir-resp`).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use weir_listen::{router, serve_http_with, App, HttpLimits, Peer, Settings};
//!
//! let settings = Settings::default();
//! let limits = HttpLimits::of(&settings);
//! let app = App::new(settings).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
//! serve_http_with(listener, router(app), limits, Peer::Unrecorded, std::future::pending())
//!     .await?;
//! # Ok(()) }
//! ```

mod accept;
mod admin_token;
mod app;
mod beside;
pub mod http;
mod settings;
mod threads;
mod tls;
mod tls_validity;

pub use accept::{
    accept_loop, drive, warn_if_files_run_short, Accepted, Activity, InFlight, Stop, Stoppable,
};
pub use admin_token::{AdminToken, TokenError};
pub use app::App;
pub use http::{
    header_limit, router, routes, serve_http, serve_http_tls, serve_http_with, serve_service_with,
    Direct, HttpLimits, NoDirect, Part, Peer,
};
pub use settings::Settings;
pub use threads::ConnectionThreads;
pub use tls::{
    acceptor as tls_acceptor, handshake as tls_handshake, warn_if_expiring, Tls, TlsError,
    TlsFiles, TlsVersion, HANDSHAKE_TIMEOUT,
};
