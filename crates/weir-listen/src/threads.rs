//! Connection threads: where the accept loop (`accept.rs`) runs each accepted connection
//! when a program asks for them. Each thread runs a single-threaded tokio runtime of its
//! own; a connection lives its whole life on the one thread it was handed to (its reads,
//! its requests' decisions, its writes, the upstream exchange `weir proxy` drives inline),
//! so a request is never handed from one worker to another and no worker wakes another.
//! Not here: accepting, caps and graceful close (`accept.rs`), what a connection speaks.
//!
//! Why: on tokio's work-stealing runtime each request of a keep-alive connection pays for
//! the scheduler's cross-thread bookkeeping (wake-ups through shared queues, unparking idle
//! workers, stealing), and on a small host the extra wake-ups are preemptions that the
//! kernel charges to every request. A plain hyper proxy on one runtime per core forwards
//! 1.36x the requests of the same proxy on a 2-worker work-stealing runtime, at 0.71x its
//! CPU a request (docs/benchmarks-history.md, "One runtime a core"). The price: a
//! connection cannot move to an idle core, so one very busy connection (all the streams of
//! one HTTP/2 connection included) is bounded by one core; connections are spread over the
//! threads by how many each holds (the fewest first), which keeps many connections
//! balanced.

use std::future::Future;
use std::io;
use std::num::NonZeroUsize;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;

/// A connection's future, as handed to a thread.
type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Threads, each with a single-threaded runtime, that run connections handed to them
/// ([`ConnectionThreads::spawn`]). Cheap to clone; the threads end once every clone is
/// dropped and the connections they hold have finished. A listener takes them in its
/// settings ([`Settings::connection_threads`](crate::Settings::connection_threads), or
/// [`HttpLimits::threads`](crate::HttpLimits::threads)).
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::num::NonZeroUsize;
/// use weir_listen::{router, serve_http_with, App, ConnectionThreads, HttpLimits, Peer, Settings};
///
/// let mut settings = Settings::default();
/// let cores = std::thread::available_parallelism().unwrap_or(NonZeroUsize::MIN);
/// settings.connection_threads = Some(ConnectionThreads::start(cores, "conn")?);
/// let limits = HttpLimits::of(&settings); // connections on those threads
/// let app = App::new(settings).await?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:9090").await?;
/// serve_http_with(listener, router(app), limits, Peer::Unrecorded, std::future::pending())
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ConnectionThreads {
    lanes: Arc<[Lane]>,
}

#[derive(Debug)]
struct Lane {
    jobs: mpsc::UnboundedSender<Job>,
    /// Connections handed to this thread and not yet finished.
    open: Arc<AtomicUsize>,
}

impl ConnectionThreads {
    /// Starts `count` threads named `{name}-{i}`.
    pub fn start(count: NonZeroUsize, name: &str) -> io::Result<Self> {
        let mut lanes = Vec::with_capacity(count.get());
        for i in 0..count.get() {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
            std::thread::Builder::new()
                .name(format!("{name}-{i}"))
                .spawn(move || {
                    runtime.block_on(async move {
                        let mut running = tokio::task::JoinSet::new();
                        loop {
                            tokio::select! {
                                job = queue.recv() => match job {
                                    Some(job) => { running.spawn(job); }
                                    None => break,
                                },
                                Some(_) = running.join_next(), if !running.is_empty() => {}
                            }
                        }
                        // No more connections will come: finish those held.
                        while running.join_next().await.is_some() {}
                    });
                })?;
            lanes.push(Lane {
                jobs,
                open: Arc::new(AtomicUsize::new(0)),
            });
        }
        Ok(Self {
            lanes: lanes.into(),
        })
    }

    /// How many threads there are.
    pub fn count(&self) -> usize {
        self.lanes.len()
    }

    /// Runs `connection` on the thread that holds the fewest connections. Should that
    /// thread have ended (it cannot, short of a panic in a connection), the connection runs
    /// on the caller's runtime instead: never dropped unserved.
    pub fn spawn(&self, connection: impl Future<Output = ()> + Send + 'static) {
        let Some(lane) = self
            .lanes
            .iter()
            .min_by_key(|lane| lane.open.load(Ordering::Relaxed))
        else {
            tokio::spawn(connection);
            return;
        };
        let open = Arc::clone(&lane.open);
        open.fetch_add(1, Ordering::Relaxed);
        let job: Job = Box::pin(async move {
            let _counted = Counted(open);
            connection.await;
        });
        if let Err(mpsc::error::SendError(job)) = lane.jobs.send(job) {
            tokio::spawn(job);
        }
    }
}

/// Two handles are equal when they share the same threads.
impl PartialEq for ConnectionThreads {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.lanes, &other.lanes)
    }
}

impl Eq for ConnectionThreads {}

/// Counts a connection out of its thread when it finishes or is dropped.
struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
