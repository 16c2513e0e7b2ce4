//! [`App`]: `weir serve`'s shared state: the listeners' state every Weir program has
//! ([`weir_listen::App`]: the engine and the shared settings, what the operations and admin
//! routes hold) and `weir serve`'s own settings (gRPC, Envoy's headers). Every decision
//! handler holds a clone; the HTTP router and the gRPC service are built from it, so tests
//! can drive the router with `oneshot` and no socket.

use std::sync::Arc;

use axum::extract::FromRef;
use weir_engine::Engine;

use crate::error::ServerError;
use crate::settings::Settings;

/// A server's state. Cheap to clone (one `Arc`).
#[derive(Debug, Clone)]
pub struct App {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    listen: weir_listen::App,
    settings: Settings,
}

impl App {
    /// Builds the engine (store, rules) from `settings.engine`. Must run inside a tokio
    /// runtime. Fails if the rules or the store URL are invalid.
    pub async fn new(settings: Settings) -> Result<App, ServerError> {
        let engine = Engine::open(settings.engine.clone()).await?;
        Ok(App::with_engine(engine, settings))
    }

    /// A server over an engine built beforehand; `settings.engine` is not read again.
    pub fn with_engine(engine: Engine, settings: Settings) -> App {
        let listen = weir_listen::App::with_engine(engine, settings.listen.clone());
        App {
            inner: Arc::new(Inner { listen, settings }),
        }
    }

    /// The decision engine.
    pub fn engine(&self) -> &Engine {
        self.inner.listen.engine()
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The listeners' state (what the operations and admin routes hold).
    pub fn listen(&self) -> &weir_listen::App {
        &self.inner.listen
    }
}

/// The decision routes read the body as the listeners' routes do (`weir_listen`'s
/// `RawBody`, under the shared body limit).
impl FromRef<App> for weir_listen::App {
    fn from_ref(app: &App) -> weir_listen::App {
        app.inner.listen.clone()
    }
}
