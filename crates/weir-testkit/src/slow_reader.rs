//! A client that sends requests and never reads the answers (a slow-read attack), for the
//! HTTP listeners' tests: `weir-listen`'s own and `weir serve`'s end to end.

use std::io;
use std::net::SocketAddr;

/// Connects to `addr` with a small receive window and writes `request` over and over,
/// reading nothing, until the server ends the connection: the error that ended it (a reset
/// or a broken pipe once the server gave the connection up). Bound it with a timeout: a
/// server that never gives up makes this wait for ever. A connection that cannot be made
/// returns its error too, which [`ended_by_the_server`] does not take for an ending.
pub async fn send_without_reading(addr: SocketAddr, request: &[u8]) -> io::Error {
    let client = async {
        let socket = tokio::net::TcpSocket::new_v4()?;
        // A small receive window: the answers back up sooner.
        socket.set_recv_buffer_size(4096)?;
        socket.connect(addr).await
    };
    let client = match client.await {
        Ok(client) => client,
        Err(error) => return error,
    };
    let batch = request.repeat(64);
    loop {
        if let Err(error) = client.writable().await {
            return error;
        }
        match client.try_write(&batch) {
            Ok(_) => {}
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
            Err(error) => return error,
        }
    }
}

/// Whether `error` says the server ended the connection (reset, or closed under a write).
pub fn ended_by_the_server(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
    )
}
