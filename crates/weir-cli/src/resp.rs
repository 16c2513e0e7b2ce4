//! `weir serve --resp ADDR`: the Redis-protocol front end (`weir-resp`) on the same engine as
//! the HTTP and gRPC APIs: its limiter (so `CL.THROTTLE` and `THROTTLE` decide on whatever
//! `--store` names, behind the same guards) and its decide path on the rules in force (so
//! `WEIR.CHECK` answers as `/v1/check` and follows every reload), stopped by the same
//! signal.

use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use weir_server::App;

/// Serves RESP on `listener` for `app`'s engine until `stop` completes.
pub(crate) fn spawn(
    listener: TcpListener,
    app: &App,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> JoinHandle<()> {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(resp = %addr, "weir serve: RESP listening (CL.THROTTLE, THROTTLE, WEIR.CHECK)");
    }
    tokio::spawn(weir_resp::serve(
        listener,
        app.engine().clone(),
        weir_resp::Settings::default(),
        stop,
    ))
}
