//! The benchmark ceilings' per-core layout (`proxy_ceiling ... per-core`,
//! `tonic_baseline ... per-core`): the layout `weir serve` and `weir proxy` serve
//! connections on (`--connection-threads`), for a baseline that does nothing else.

use std::future::Future;
use std::io;
use std::net::SocketAddr;

/// Runs `serve` on one single-threaded runtime on each of `threads` threads, each with a
/// listener of its own bound to `addr` (`SO_REUSEPORT`: the kernel spreads connections
/// over them); returns when every thread has, with the first error.
pub fn serve_per_core<F, Fut>(addr: SocketAddr, threads: usize, serve: F) -> io::Result<()>
where
    F: Fn(tokio::net::TcpListener) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = io::Result<()>>,
{
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let serve = serve.clone();
            std::thread::spawn(move || -> io::Result<()> {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    let socket = match addr {
                        SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
                        SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
                    };
                    socket.set_reuseport(true)?;
                    socket.set_reuseaddr(true)?;
                    socket.bind(addr)?;
                    serve(socket.listen(1024)?).await
                })
            })
        })
        .collect();
    for handle in handles {
        handle
            .join()
            .map_err(|_| io::Error::other("a serving thread panicked"))??;
    }
    Ok(())
}
