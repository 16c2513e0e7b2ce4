//! The wiring `weir serve --resp` uses: `weir serve`'s limiter and rule book behind two
//! small wrappers, handed to `weir_resp::serve`.

use std::sync::Arc;

use weir_config::{Descriptor, MatchError, Matched};
use weir_core::ManualClock;
use weir_engine::{EngineLimiter as ServerLimiter, RuleBook};
use weir_server::{App, RuleSource, SharedClock, StoreClock, StoreSpec};

/// `weir serve`'s limiter, for `weir_resp::serve`.
pub struct AppLimiter(pub App);

impl std::ops::Deref for AppLimiter {
    type Target = ServerLimiter;
    fn deref(&self) -> &ServerLimiter {
        self.0.engine().limiter()
    }
}

/// `weir serve`'s rule book (swapped on reload), for `WEIR.CHECK`.
pub struct AppRules(pub Arc<RuleBook>);

impl weir_resp::Rules for AppRules {
    fn matches(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Result<Vec<Option<Matched>>, MatchError> {
        self.0.snapshot().rules.matches(domain, descriptors)
    }
}

/// A `weir serve` engine on the example rules and `clock`, on the store `url` names
/// (`memory` when `None`), deciding by the process's (manual) clock.
pub async fn app(clock: &ManualClock, url: Option<&str>) -> App {
    let mut settings = weir_server::Settings::default();
    settings.engine.rules = RuleSource::Example;
    settings.engine.clock = SharedClock::new(clock.clone());
    if let Some(url) = url {
        settings.engine.store = StoreSpec::parse(url).unwrap();
        settings.engine.store_clock = StoreClock::Process;
    }
    App::new(settings).await.unwrap()
}

/// `weir_resp::serve` on `app`, as `weir serve --resp` runs it.
pub async fn serve_resp(
    app: &App,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let settings = weir_resp::Settings::default().shadow(app.engine().global_shadow());
    let rules = AppRules(Arc::clone(app.engine().rules()));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(weir_resp::serve(
        listener,
        AppLimiter(app.clone()),
        rules,
        settings,
        async move {
            let _ = stopped.await;
        },
    ));
    (addr, stop, task)
}
