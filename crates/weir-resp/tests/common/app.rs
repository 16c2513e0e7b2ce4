//! The wiring `weir serve --resp` uses: `weir serve`'s own engine handed to
//! `weir_resp::serve`, so RESP and HTTP decide on one store and one rule book.

use weir_core::ManualClock;
use weir_server::{App, RuleSource, SharedClock, StoreClock, StoreSpec};

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

/// `weir_resp::serve` on `app`'s engine, as `weir serve --resp` runs it.
pub async fn serve_resp(
    app: &App,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(weir_resp::serve(
        listener,
        app.engine().clone(),
        weir_resp::Settings::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    (addr, stop, task)
}
