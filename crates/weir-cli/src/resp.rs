//! `weir serve --resp ADDR`: the Redis-protocol front end (`weir-resp`) on the same engine as
//! the HTTP and gRPC APIs: its limiter (so `CL.THROTTLE` and `THROTTLE` decide on whatever
//! `--store` names, behind the same guards) and its rules in force (so `WEIR.CHECK` follows
//! every reload), stopped by the same signal.

use std::sync::Arc;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use weir_config::{Descriptor, MatchError, Matched};
use weir_engine::{EngineLimiter, RuleBook};
use weir_server::App;

/// The engine's limiter, as `weir_resp::serve` takes one.
struct AppLimiter(App);

impl std::ops::Deref for AppLimiter {
    type Target = EngineLimiter;

    fn deref(&self) -> &EngineLimiter {
        self.0.engine().limiter()
    }
}

/// The rules in force, read at each request (a reload swaps them).
struct AppRules(Arc<RuleBook>);

impl weir_resp::Rules for AppRules {
    fn matches(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Result<Vec<Option<Matched>>, MatchError> {
        self.0.snapshot().rules.matches(domain, descriptors)
    }
}

/// Serves RESP on `listener` for `app` until `stop` completes.
pub(crate) fn spawn(
    listener: TcpListener,
    app: &App,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(resp = %addr, "weir serve: RESP listening (CL.THROTTLE, THROTTLE, WEIR.CHECK)");
    }
    let settings = weir_resp::Settings::default().shadow(app.engine().global_shadow());
    tokio::spawn(weir_resp::serve(
        listener,
        AppLimiter(app.clone()),
        AppRules(Arc::clone(app.engine().rules())),
        settings,
        stop,
    ))
}
