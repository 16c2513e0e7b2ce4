//! The one shutdown sequence of `weir serve` and `weir proxy`: two listener tasks run until
//! the shutdown signal (or until one of them ends on its own); then both stop accepting,
//! in-flight requests get up to a grace period, whatever is still running is aborted, and
//! the background tasks (rule reload, store sweep) stop.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A listener's task: serves until told to stop, then drains.
pub type ListenerTask = JoinHandle<std::io::Result<()>>;

/// The stop signal two listeners share, and the sequence that ends them.
#[derive(Debug)]
pub struct Lifecycle {
    stop: watch::Sender<bool>,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Self::new()
    }
}

impl Lifecycle {
    /// A lifecycle whose stop signal has not been given.
    pub fn new() -> Self {
        Self {
            stop: watch::channel(false).0,
        }
    }

    /// A future that completes when the listeners must stop accepting: hand one to each
    /// listener.
    pub fn stopped(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut stop = self.stop.subscribe();
        async move {
            let _ = stop.wait_for(|stop| *stop).await;
        }
    }

    /// Runs `listeners` until `shutdown` completes or one of them ends on its own; then
    /// calls `draining`, stops both, waits up to `grace` for their in-flight requests,
    /// aborts what is left and the `background` tasks. Returns how the first listener to
    /// end on its own ended (its index and result), or `None` after a shutdown.
    pub async fn run(
        self,
        program: &'static str,
        listeners: [ListenerTask; 2],
        shutdown: impl Future<Output = ()>,
        grace: Duration,
        draining: impl FnOnce(),
        background: Vec<JoinHandle<()>>,
    ) -> Option<(usize, std::io::Result<()>)> {
        let [mut first, mut second] = listeners;
        let joined = |r: Result<std::io::Result<()>, tokio::task::JoinError>| {
            r.unwrap_or_else(|join| Err(std::io::Error::other(join.to_string())))
        };
        let early = tokio::select! {
            () = shutdown => None,
            r = &mut first => Some((0, joined(r))),
            r = &mut second => Some((1, joined(r))),
        };
        tracing::info!(program, "shutting down, finishing in-flight requests");
        draining();
        let _ = self.stop.send(true);
        let drained = tokio::time::timeout(grace, async {
            let _ = (&mut first).await;
            let _ = (&mut second).await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                program,
                ?grace,
                "requests still in flight after the grace period; stopping"
            );
            first.abort();
            second.abort();
        }
        for task in background {
            task.abort();
        }
        tracing::info!(program, "stopped");
        early
    }
}
