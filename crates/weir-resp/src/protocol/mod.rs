//! The wire: RESP requests in (`decode.rs`, bounded and resumable) and replies out
//! (`reply.rs`, RESP2 or RESP3). No command knows bytes; no byte here knows a command.

mod decode;
mod reply;

pub(crate) use decode::{Decoder, Limits};
pub(crate) use reply::{Proto, Reply};
