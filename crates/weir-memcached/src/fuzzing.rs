//! Entry points for the fuzz targets (`fuzz/`) and the stable fuzz smoke test
//! (`tests/fuzz_smoke.rs`): the reply parser over arbitrary bytes, as a server (or anyone
//! on the path) might send them. Not part of the API; hidden from the docs.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use crate::client::protocol::{read_reply, Kind};

/// Parses `bytes` as a stream of replies to commands of one kind (`kind % 6`: gets, add,
/// cas, incr, decr, version) until one fails or the bytes run out; the number parsed. Must
/// never panic or loop: every reply consumes at least one byte.
pub fn parse_replies(kind: u8, bytes: &[u8]) -> usize {
    let kind = match kind % 6 {
        0 => Kind::Gets,
        1 => Kind::Add,
        2 => Kind::Cas,
        3 => Kind::Incr,
        4 => Kind::Decr,
        _ => Kind::Version,
    };
    let mut reader = bytes;
    let mut parsed = 0;
    loop {
        let before = reader.len();
        match ready(read_reply(&mut reader, kind)) {
            Some(Ok(_)) if reader.len() < before => parsed += 1,
            _ => return parsed,
        }
    }
}

/// Polls a future that never waits (it reads from memory) to its end; `None` if it would.
fn ready<F: Future>(future: F) -> Option<F::Output> {
    let mut future = pin!(future);
    let mut cx = Context::from_waker(Waker::noop());
    match future.as_mut().poll(&mut cx) {
        Poll::Ready(out) => Some(out),
        Poll::Pending => None,
    }
}
