//! The accept loop: at most [`Settings::max_connections`] connections at once (one past it
//! is told Redis's `-ERR max number of clients reached` and closed), each served by its
//! own task (`connection.rs`; on a connection thread from accept to close when
//! [`Settings::connection_threads`] gives them), after a TLS handshake when TLS is on (`weir_listen`'s, with
//! its timeout); on shutdown it stops accepting, lets every connection finish the command
//! it is running, and returns once all are closed, or once `shutdown_grace` has passed,
//! dropping those still open (a client that never reads cannot hold the process up).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::JoinSet;
use weir_engine::Engine;
use weir_listen::Accepted;

use crate::commands::Shared;
use crate::connection;
use crate::settings::Settings;

/// Connections past the cap being told so at once.
const REFUSING: usize = 64;

/// Serves the RESP front end on `listener` until `shutdown` completes, then waits for the
/// open connections to finish their current command (at most
/// [`Settings::shutdown_grace`]).
///
/// Every command decides through `engine`: `CL.THROTTLE` and `THROTTLE` with
/// [`Engine::check_rule`] (on whatever store it has, behind the same guards, judged and
/// counted as `weir serve`'s other APIs), and `WEIR.CHECK` through its decide path, on the
/// rules in force (a reload swaps them for the next command).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use weir_engine::{Engine, EngineSettings};
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:6380").await?;
/// let engine = Engine::open(EngineSettings::default()).await?; // example rules, memory
/// weir_resp::serve(listener, engine, weir_resp::Settings::default(), async {
///     let _ = tokio::signal::ctrl_c().await;
/// })
/// .await;
/// # Ok(()) }
/// ```
pub async fn serve(
    listener: TcpListener,
    engine: Engine,
    settings: Settings,
    shutdown: impl Future<Output = ()> + Send,
) {
    let slots = Arc::new(Semaphore::new(settings.max_connections));
    let refusals = Arc::new(Semaphore::new(REFUSING));
    let grace = settings.shutdown_grace;
    let shared = Arc::new(Shared::new(engine, settings));
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    // Connections on connection threads are not in `tasks`: each holds a clone of `alive`
    // (never sent on) until it ends, and `abort` ends those still open after the grace.
    let (alive, mut all_ended) = mpsc::channel::<()>(1);
    let (abort, aborted) = watch::channel(false);
    let mut next_id: u64 = 0;
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let accepted = tokio::select! {
            () = &mut shutdown => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Out of file descriptors, usually: let connections close, then go on.
                tracing::warn!(%error, "RESP front end: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&slots).try_acquire_owned() else {
            shared.stats.rejected();
            // Told why, within a second, by at most REFUSING tasks at once; past that the
            // connection is just closed.
            if let Ok(refusing) = Arc::clone(&refusals).try_acquire_owned() {
                tasks.spawn(async move {
                    let mut stream = stream;
                    let refusal = stream.write_all(b"-ERR max number of clients reached\r\n");
                    let _ = tokio::time::timeout(Duration::from_secs(1), refusal).await;
                    drop(refusing);
                });
            }
            continue;
        };
        let _ = stream.set_nodelay(true);
        let threads = shared.settings.threads.clone();
        let stream = match Accepted::new(stream, threads.as_ref()) {
            Ok(stream) => stream,
            Err(error) => {
                tracing::debug!(%peer, %error, "RESP front end: connection dropped: it could not be handed over");
                continue;
            }
        };
        next_id += 1;
        let shared = Arc::clone(&shared);
        let stopped = stopped.clone();
        let id = next_id;
        shared.stats.opened();
        let open = Open(Arc::clone(&shared));
        let connection = async move {
            match stream.open() {
                Ok(stream) => serve_one(stream, peer, shared, id, stopped).await,
                Err(error) => {
                    tracing::debug!(%peer, %error, "RESP front end: connection dropped: its socket could not be watched")
                }
            }
            drop(permit);
            drop(open);
        };
        match &threads {
            None => {
                tasks.spawn(connection);
            }
            // Off this runtime: counted by `alive` and cut short by `abort`.
            Some(threads) => {
                let alive = alive.clone();
                let mut aborted = aborted.clone();
                threads.spawn(async move {
                    tokio::select! {
                        () = connection => {}
                        _ = aborted.wait_for(|abort| *abort) => {}
                    }
                    drop(alive);
                });
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    drop(alive);
    let drained = async {
        while tasks.join_next().await.is_some() {}
        // `None` once every connection on a connection thread has ended.
        let _ = all_ended.recv().await;
    };
    if tokio::time::timeout(grace, drained).await.is_err() {
        let _ = abort.send(true);
        tracing::warn!(
            open = shared.stats.connected(),
            grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            "RESP front end: connections still open after the shutdown grace, dropped"
        );
        tasks.shutdown().await;
    }
}

/// One connection, after its TLS handshake when TLS is on.
async fn serve_one(
    stream: TcpStream,
    peer: std::net::SocketAddr,
    shared: Arc<Shared>,
    id: u64,
    stopped: watch::Receiver<bool>,
) {
    match shared.settings.tls.clone() {
        None => connection::handle(stream, Arc::clone(&shared), id, stopped).await,
        Some(tls) => {
            if let Some(stream) = weir_listen::tls_handshake(&tls, stream, peer).await {
                connection::handle(stream, Arc::clone(&shared), id, stopped).await;
            }
        }
    }
}

/// Counts its connection as closed when dropped, however the task ends (aborted at the
/// end of the shutdown grace included).
struct Open(Arc<Shared>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.stats.closed();
    }
}
