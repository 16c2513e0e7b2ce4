//! One client connection: read → decode every complete command → run each in order →
//! encode its reply → write, so pipelined commands are answered in the order sent and a
//! client that stops reading its replies stops being read (TCP back-pressure bounds what
//! either side holds). Closed on `QUIT`, end of stream, a protocol error (answered first,
//! as Redis does), the idle timeout, or the server's shutdown between two commands.

use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::commands::{self, Session, Shared};
use crate::protocol::{Decoder, Limits, Reply};

/// Replies are written once this many bytes are waiting, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;
/// Bytes read at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Serves `stream` until it closes.
pub(crate) async fn handle(
    mut stream: TcpStream,
    shared: Arc<Shared>,
    id: u64,
    mut shutdown: watch::Receiver<bool>,
) {
    let settings = &shared.settings;
    let mut decoder = Decoder::new(Limits {
        max_args: settings.max_args,
        max_bulk_bytes: settings.max_bulk_bytes,
        max_request_bytes: settings.max_request_bytes,
    });
    let mut session = Session::new(id);
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut output = BytesMut::with_capacity(READ_CHUNK);
    loop {
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(args)) => {
                    let reply = commands::run(&shared, &mut session, &args).await;
                    reply.encode(session.proto, &mut output);
                    if session.quit {
                        let _ = stream.write_all(&output).await;
                        return;
                    }
                    if output.len() >= FLUSH_AT && !flush(&mut stream, &mut output).await {
                        return;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(connection = id, reason = %error.0, "RESP protocol error, closing");
                    Reply::error(format!("ERR Protocol error: {}", error.0))
                        .encode(session.proto, &mut output);
                    let _ = stream.write_all(&output).await;
                    return;
                }
            }
        }
        if !flush(&mut stream, &mut output).await {
            return;
        }
        if *shutdown.borrow() {
            return;
        }
        input.reserve(READ_CHUNK);
        let read = tokio::select! {
            read = tokio::time::timeout(settings.idle_timeout, stream.read_buf(&mut input)) => read,
            _ = shutdown.changed() => return,
        };
        match read {
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(_)) => {}
            Err(_) => {
                tracing::debug!(connection = id, "idle RESP connection closed");
                return;
            }
        }
    }
}

/// Writes what is waiting; false if the peer is gone.
async fn flush(stream: &mut TcpStream, output: &mut BytesMut) -> bool {
    if output.is_empty() {
        return true;
    }
    let written = stream.write_all(output).await.is_ok();
    output.clear();
    written
}
