//! [`App`]: what the listeners' routes share: the engine (`weir_engine::Engine`: rules,
//! store, limiter, metrics) and the listeners' settings. Every operations and admin
//! handler holds a clone; the HTTP router is built from it, so tests can drive the router
//! with `oneshot` and no socket. `weir serve`'s own state (`weir_server::App`) holds one.

use std::sync::Arc;

use weir_engine::{Engine, EngineError};

use crate::settings::Settings;

/// The listeners' state. Cheap to clone (one `Arc`).
#[derive(Debug, Clone)]
pub struct App {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    engine: Engine,
    settings: Settings,
}

impl App {
    /// Builds the engine (store, rules) from `settings.engine`. Must run inside a tokio
    /// runtime. Fails if the rules or the store URL are invalid.
    pub async fn new(settings: Settings) -> Result<App, EngineError> {
        let engine = Engine::open(settings.engine.clone()).await?;
        Ok(App::with_engine(engine, settings))
    }

    /// The state over an engine built beforehand (`weir proxy` serves its API this way);
    /// `settings.engine` is not read again.
    pub fn with_engine(engine: Engine, settings: Settings) -> App {
        App {
            inner: Arc::new(Inner { engine, settings }),
        }
    }

    /// The decision engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }
}
