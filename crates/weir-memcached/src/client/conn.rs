//! One TCP connection to memcached: writes a batch of commands at once (pipelining) and
//! reads their replies in order. Knows nothing of pooling or timeouts (`pool.rs`); any error
//! leaves the connection unusable, and the pool drops it.

use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use weir_core::StoreError;

use super::protocol::{read_reply, Command, Reply};

/// A connection, buffered for reading.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: BufReader<TcpStream>,
}

impl Conn {
    /// Connects to `addr` (`host:port`).
    pub(crate) async fn connect(addr: &str) -> Result<Self, StoreError> {
        let stream = TcpStream::connect(addr).await.map_err(|e| {
            StoreError::Unavailable(format!("cannot connect to memcached at {addr}: {e}"))
        })?;
        stream
            .set_nodelay(true)
            .map_err(|e| StoreError::Unavailable(format!("memcached socket: {e}")))?;
        Ok(Self {
            stream: BufReader::new(stream),
        })
    }

    /// Sends every command in one write, then reads one reply per command.
    pub(crate) async fn exchange(
        &mut self,
        commands: &[Command],
    ) -> Result<Vec<Reply>, StoreError> {
        let mut out = Vec::with_capacity(64 * commands.len());
        for command in commands {
            command.encode(&mut out);
        }
        self.stream
            .get_mut()
            .write_all(&out)
            .await
            .map_err(|e| StoreError::Unavailable(format!("memcached write: {e}")))?;
        let mut replies = Vec::with_capacity(commands.len());
        for command in commands {
            replies.push(read_reply(&mut self.stream, command).await?);
        }
        Ok(replies)
    }
}
