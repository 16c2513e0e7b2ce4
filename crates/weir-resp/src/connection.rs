//! One client connection: (TLS handshake →) read → decode every complete command → run
//! each in order → encode its reply → write, so pipelined commands are answered in the
//! order sent. Closed on `QUIT`, end of stream, a protocol error (answered first, as Redis
//! does), the server's shutdown between two commands, or a time bound:
//! - between commands, [`Settings::idle_timeout`](crate::Settings::idle_timeout) of
//!   silence;
//! - within a command, a deadline counted from its first byte (`command_timeout`):
//!   trickling bytes does not move it;
//! - writing replies, `write_timeout`: a client that pipelines and never reads is closed,
//!   and cannot hold up shutdown.

use std::pin::Pin;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;
use tokio::time::Sleep;

use crate::commands::{self, Session, Shared};
use crate::protocol::{Decoder, Limits, Reply};

/// Replies are written once this many bytes are waiting, even mid-pipeline.
const FLUSH_AT: usize = 64 * 1024;
/// Bytes read at a time.
const READ_CHUNK: usize = 16 * 1024;

/// Serves `stream` until it closes.
pub(crate) async fn handle<S>(
    mut stream: S,
    shared: Arc<Shared>,
    id: u64,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let settings = &shared.settings;
    let mut decoder = Decoder::new(Limits {
        max_args: settings.max_args,
        max_bulk_bytes: settings.max_bulk_bytes,
        max_request_bytes: settings.max_request_bytes,
    });
    let mut session = Session::new(id, settings.password.is_none());
    let mut input = BytesMut::with_capacity(READ_CHUNK);
    let mut output = BytesMut::with_capacity(READ_CHUNK);
    // When the command being received must be complete (armed by its first byte).
    let mut command_deadline: Option<Pin<Box<Sleep>>> = None;
    loop {
        loop {
            match decoder.decode(&mut input) {
                Ok(Some(args)) => {
                    command_deadline = None;
                    let reply = commands::run(&shared, &mut session, &args).await;
                    reply.encode(session.proto, &mut output);
                    if session.quit {
                        let _ = write(&mut stream, &mut output, settings.write_timeout).await;
                        return;
                    }
                    if output.len() >= FLUSH_AT
                        && !write(&mut stream, &mut output, settings.write_timeout).await
                    {
                        return;
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(connection = id, reason = %error.0, "RESP protocol error, closing");
                    Reply::error(format!("ERR Protocol error: {}", error.0))
                        .encode(session.proto, &mut output);
                    let _ = write(&mut stream, &mut output, settings.write_timeout).await;
                    return;
                }
            }
        }
        if !write(&mut stream, &mut output, settings.write_timeout).await {
            return;
        }
        if *shutdown.borrow() {
            return;
        }
        // Bytes of a command not yet whole (the decoder's or the buffer's): its deadline,
        // set when they arrived, holds; else the connection is idle.
        let partial = !input.is_empty() || decoder.in_progress();
        input.reserve(READ_CHUNK);
        let read = if partial {
            let deadline = command_deadline
                .get_or_insert_with(|| Box::pin(tokio::time::sleep(settings.command_timeout)));
            tokio::select! {
                read = stream.read_buf(&mut input) => Some(read),
                () = deadline.as_mut() => None,
                _ = shutdown.changed() => return,
            }
        } else {
            command_deadline = None;
            tokio::select! {
                read = tokio::time::timeout(settings.idle_timeout, stream.read_buf(&mut input)) => read.ok(),
                _ = shutdown.changed() => return,
            }
        };
        match read {
            Some(Ok(0)) | Some(Err(_)) => return,
            Some(Ok(_)) => {}
            None => {
                tracing::debug!(
                    connection = id,
                    partial,
                    "RESP connection closed: idle, or a command not sent in time"
                );
                return;
            }
        }
    }
}

/// Writes what is waiting within `timeout`; false if the peer is gone or does not read.
async fn write<S: AsyncWrite + Unpin>(
    stream: &mut S,
    output: &mut BytesMut,
    timeout: std::time::Duration,
) -> bool {
    if output.is_empty() {
        return true;
    }
    let written = async {
        stream.write_all(output).await?;
        stream.flush().await
    };
    let ok = matches!(tokio::time::timeout(timeout, written).await, Ok(Ok(())));
    output.clear();
    ok
}
