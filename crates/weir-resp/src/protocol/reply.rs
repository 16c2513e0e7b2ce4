//! Replies and their encoding in the protocol the connection speaks: RESP2 (the default)
//! or RESP3 (after `HELLO 3`). A command builds one [`Reply`]; the connection encodes it
//! into its write buffer. The two protocols differ here only in maps (RESP3 `%`, RESP2 a
//! flat array of names and values, as Redis answers `HELLO` and `CONFIG GET`) and nulls
//! (`_` against `$-1`). Numbers are written without allocating (`itoa`): a pipelined
//! `CL.THROTTLE` answers five of them per command.

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol version a connection speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proto {
    Resp2,
    Resp3,
}

/// One reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `+OK`.
    Simple(&'static str),
    /// `-ERR …`: the whole line after the `-`, its first word the error code.
    Error(String),
    /// `:42`.
    Int(i64),
    /// `$3\r\nfoo`.
    Bulk(Bytes),
    /// No value.
    Null,
    /// `*N`.
    Array(Vec<Reply>),
    /// RESP3 `%N`; RESP2 a flat array of `2N` items.
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    /// `OK`.
    pub(crate) const OK: Reply = Reply::Simple("OK");

    /// An error reply: `code` (`ERR`, `NOPROTO`, …) then the message.
    pub(crate) fn error(message: impl std::fmt::Display) -> Reply {
        let text = message.to_string();
        Reply::Error(text.replace(['\r', '\n'], " "))
    }

    /// A bulk string from text.
    pub(crate) fn text(text: impl Into<String>) -> Reply {
        Reply::Bulk(Bytes::from(text.into()))
    }

    /// A bulk string from a static name.
    pub(crate) fn name(text: &'static str) -> Reply {
        Reply::Bulk(Bytes::from_static(text.as_bytes()))
    }

    /// Appends this reply, encoded for `proto`, to `out`.
    pub(crate) fn encode(&self, proto: Proto, out: &mut BytesMut) {
        match self {
            Reply::Simple(s) => line(out, b'+', s.as_bytes()),
            Reply::Error(e) => line(out, b'-', e.as_bytes()),
            Reply::Int(n) => line(out, b':', itoa::Buffer::new().format(*n).as_bytes()),
            Reply::Bulk(b) => {
                line(out, b'$', itoa::Buffer::new().format(b.len()).as_bytes());
                out.put_slice(b);
                out.put_slice(b"\r\n");
            }
            Reply::Null => match proto {
                Proto::Resp2 => out.put_slice(b"$-1\r\n"),
                Proto::Resp3 => out.put_slice(b"_\r\n"),
            },
            Reply::Array(items) => {
                line(
                    out,
                    b'*',
                    itoa::Buffer::new().format(items.len()).as_bytes(),
                );
                for item in items {
                    item.encode(proto, out);
                }
            }
            Reply::Map(pairs) => {
                match proto {
                    Proto::Resp2 => line(
                        out,
                        b'*',
                        itoa::Buffer::new()
                            .format(pairs.len().saturating_mul(2))
                            .as_bytes(),
                    ),
                    Proto::Resp3 => line(
                        out,
                        b'%',
                        itoa::Buffer::new().format(pairs.len()).as_bytes(),
                    ),
                }
                for (name, value) in pairs {
                    name.encode(proto, out);
                    value.encode(proto, out);
                }
            }
        }
    }
}

fn line(out: &mut BytesMut, kind: u8, body: &[u8]) {
    out.reserve(body.len() + 3);
    out.put_u8(kind);
    out.put_slice(body);
    out.put_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(reply: &Reply, proto: Proto) -> Vec<u8> {
        let mut out = BytesMut::new();
        reply.encode(proto, &mut out);
        out.to_vec()
    }

    #[test]
    fn maps_and_nulls_follow_the_protocol() {
        let map = Reply::Map(vec![
            (Reply::name("a"), Reply::Int(1)),
            (Reply::name("b"), Reply::Null),
        ]);
        assert_eq!(
            encoded(&map, Proto::Resp2),
            b"*4\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n$-1\r\n"
        );
        assert_eq!(
            encoded(&map, Proto::Resp3),
            b"%2\r\n$1\r\na\r\n:1\r\n$1\r\nb\r\n_\r\n"
        );
    }

    #[test]
    fn an_error_never_spans_two_lines() {
        let reply = Reply::error("ERR bad\r\nthing");
        assert_eq!(encoded(&reply, Proto::Resp2), b"-ERR bad  thing\r\n");
    }
}
