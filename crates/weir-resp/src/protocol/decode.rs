//! The request decoder: bytes from the socket → one command (its arguments) at a time.
//! Pure and resumable: it keeps the arguments of a half-received command between reads,
//! so a command trickling in byte by byte is never re-parsed from its start. It decodes
//! RESP multibulk requests (`*N\r\n$len\r\n…`, what every client library, `redis-cli` and
//! `redis-benchmark` send) and inline commands (`PING\r\n`, what a person types into
//! `nc`; split on spaces and tabs, no quoting).
//!
//! Every size is bounded before anything is buffered ([`Limits`]): the argument count,
//! each argument's length, one command's total bytes and the length of a header or inline
//! line. A violation is a [`ProtocolError`]: the connection answers it with Redis's
//! `-ERR Protocol error: …` and closes, as Redis does. Not here: what a command means
//! (`commands/`), reading the socket (`connection.rs`).

use bytes::{Buf, Bytes, BytesMut};

/// The bounds one decoder enforces.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// Arguments per command, the command name included.
    pub(crate) max_args: usize,
    /// Bytes per argument.
    pub(crate) max_bulk_bytes: usize,
    /// Bytes of one command's arguments together.
    pub(crate) max_request_bytes: usize,
}

/// Bytes allowed in a `*N` / `$N` header line or an inline command (Redis's 64 KiB).
const MAX_LINE: usize = 64 * 1024;

/// Why a request cannot be read: the connection is answered this and closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtocolError(pub(crate) String);

impl ProtocolError {
    fn new(reason: impl Into<String>) -> Self {
        Self(reason.into())
    }
}

/// A command whose arguments are still arriving.
#[derive(Debug)]
struct Pending {
    /// Arguments still to come.
    missing: usize,
    /// The length of the bulk string being received, once its header was read.
    bulk_len: Option<usize>,
    /// The arguments received so far.
    args: Vec<Bytes>,
    /// Their bytes together.
    bytes: usize,
}

/// Decodes commands from a connection's read buffer.
#[derive(Debug)]
pub(crate) struct Decoder {
    limits: Limits,
    pending: Option<Pending>,
    /// Bytes of `buf` already searched for the end of the line being received, so a line
    /// trickling in is not rescanned from its start on every read.
    scanned: usize,
}

impl Decoder {
    pub(crate) fn new(limits: Limits) -> Self {
        Self {
            limits,
            pending: None,
            scanned: 0,
        }
    }

    /// Whether part of a command was consumed and the rest has yet to arrive.
    pub(crate) fn in_progress(&self) -> bool {
        self.pending.is_some()
    }

    /// The next complete command in `buf`, consuming its bytes; `None` until more bytes
    /// arrive. Empty inline lines and `*0` / `*-1` headers are skipped, as Redis does.
    pub(crate) fn decode(
        &mut self,
        buf: &mut BytesMut,
    ) -> Result<Option<Vec<Bytes>>, ProtocolError> {
        loop {
            if let Some(pending) = self.pending.as_mut() {
                return match fill(pending, buf, &self.limits, &mut self.scanned)? {
                    true => Ok(self.pending.take().map(|p| p.args)),
                    false => Ok(None),
                };
            }
            let Some(&first) = buf.first() else {
                return Ok(None);
            };
            if first != b'*' {
                match inline(buf, &self.limits, &mut self.scanned)? {
                    Some(args) if args.is_empty() => continue,
                    other => return Ok(other),
                }
            }
            let Some(line) = take_line(buf, "multibulk count", &mut self.scanned)? else {
                return Ok(None);
            };
            let count = number(&line[1..])
                .filter(|&n| n <= 1024 * 1024)
                .ok_or_else(|| ProtocolError::new("invalid multibulk length"))?;
            if count <= 0 {
                continue;
            }
            let count = usize::try_from(count)
                .map_err(|_| ProtocolError::new("invalid multibulk length"))?;
            if count > self.limits.max_args {
                return Err(ProtocolError::new(format!(
                    "{count} arguments, above the maximum of {}",
                    self.limits.max_args
                )));
            }
            self.pending = Some(Pending {
                missing: count,
                bulk_len: None,
                args: Vec::with_capacity(count.min(16)),
                bytes: 0,
            });
        }
    }
}

/// Reads as many of `pending`'s arguments as `buf` holds; true once it has them all.
fn fill(
    pending: &mut Pending,
    buf: &mut BytesMut,
    limits: &Limits,
    scanned: &mut usize,
) -> Result<bool, ProtocolError> {
    while pending.missing > 0 {
        let len = match pending.bulk_len {
            Some(len) => len,
            None => {
                let Some(&first) = buf.first() else {
                    return Ok(false);
                };
                if first != b'$' {
                    return Err(ProtocolError::new(format!(
                        "expected '$', got '{}'",
                        char::from(first).escape_default()
                    )));
                }
                let Some(line) = take_line(buf, "bulk length", scanned)? else {
                    return Ok(false);
                };
                let len = number(&line[1..])
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| ProtocolError::new("invalid bulk length"))?;
                if len > limits.max_bulk_bytes {
                    return Err(ProtocolError::new(format!(
                        "an argument of {len} bytes, above the maximum of {}",
                        limits.max_bulk_bytes
                    )));
                }
                let total = pending.bytes.saturating_add(len);
                if total > limits.max_request_bytes {
                    return Err(ProtocolError::new(format!(
                        "a command of more than {} bytes",
                        limits.max_request_bytes
                    )));
                }
                pending.bulk_len = Some(len);
                len
            }
        };
        let Some(needed) = len.checked_add(2) else {
            return Err(ProtocolError::new("invalid bulk length"));
        };
        if buf.len() < needed {
            // The connection grows the buffer by what actually arrives, never by what a
            // header announces.
            return Ok(false);
        }
        if &buf[len..needed] != b"\r\n" {
            return Err(ProtocolError::new("expected CRLF after a bulk string"));
        }
        let arg = buf.split_to(len).freeze();
        buf.advance(2);
        pending.bytes += len;
        pending.args.push(arg);
        pending.bulk_len = None;
        pending.missing -= 1;
    }
    Ok(true)
}

/// An inline command: one line split on spaces and tabs. `Some(empty)` for a blank line.
fn inline(
    buf: &mut BytesMut,
    limits: &Limits,
    scanned: &mut usize,
) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    let Some(line) = take_line(buf, "inline request", scanned)? else {
        return Ok(None);
    };
    let args: Vec<Bytes> = line[..]
        .split(|&b| b == b' ' || b == b'\t')
        .filter(|part| !part.is_empty())
        .map(Bytes::copy_from_slice)
        .collect();
    if args.len() > limits.max_args {
        return Err(ProtocolError::new(format!(
            "{} arguments, above the maximum of {}",
            args.len(),
            limits.max_args
        )));
    }
    Ok(Some(args))
}

/// The next line of `buf` without its `\r\n` (or bare `\n`), consumed; `None` if it has
/// not all arrived. A line longer than [`MAX_LINE`] is a protocol error. `scanned` carries
/// how much of an unfinished line was searched already (0 once a line is taken).
fn take_line(
    buf: &mut BytesMut,
    what: &str,
    scanned: &mut usize,
) -> Result<Option<BytesMut>, ProtocolError> {
    let from = (*scanned).min(buf.len());
    let window = &buf[from..buf.len().min(MAX_LINE + 2)];
    match window.iter().position(|&b| b == b'\n').map(|i| from + i) {
        Some(end) => {
            *scanned = 0;
            let mut line = buf.split_to(end + 1);
            line.truncate(end);
            if line.last() == Some(&b'\r') {
                line.truncate(end - 1);
            }
            Ok(Some(line))
        }
        None if buf.len() > MAX_LINE => Err(ProtocolError::new(format!("too big {what}"))),
        None => {
            *scanned = buf.len().min(MAX_LINE + 2);
            Ok(None)
        }
    }
}

/// A header's number: optional `-`, then ASCII digits only (Redis's `string2ll`).
fn number(digits: &[u8]) -> Option<i64> {
    std::str::from_utf8(digits)
        .ok()
        .filter(|s| !s.starts_with('+'))
        .and_then(|s| s.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_args: 4,
        max_bulk_bytes: 8,
        max_request_bytes: 12,
    };

    fn all(input: &[u8]) -> Result<Vec<Vec<Bytes>>, ProtocolError> {
        let mut decoder = Decoder::new(LIMITS);
        let mut buf = BytesMut::from(input);
        let mut out = Vec::new();
        while let Some(cmd) = decoder.decode(&mut buf)? {
            out.push(cmd);
        }
        Ok(out)
    }

    fn args(list: &[&str]) -> Vec<Bytes> {
        list.iter()
            .map(|s| Bytes::copy_from_slice(s.as_bytes()))
            .collect()
    }

    #[test]
    fn pipelined_multibulk_and_inline_commands_come_out_in_order() {
        let cmds = all(b"*1\r\n$4\r\nPING\r\nPING hi\r\n\r\n*0\r\n*2\r\n$4\r\nECHO\r\n$0\r\n\r\n")
            .unwrap();
        assert_eq!(
            cmds,
            vec![args(&["PING"]), args(&["PING", "hi"]), args(&["ECHO", ""])]
        );
    }

    #[test]
    fn a_command_arriving_byte_by_byte_is_decoded_once_whole() {
        let input = b"*2\r\n$4\r\nECHO\r\n$5\r\nhello\r\n";
        let mut decoder = Decoder::new(LIMITS);
        let mut buf = BytesMut::new();
        for (i, byte) in input.iter().enumerate() {
            buf.extend_from_slice(&[*byte]);
            let got = decoder.decode(&mut buf).unwrap();
            if i + 1 < input.len() {
                assert_eq!(got, None, "at byte {i}");
            } else {
                assert_eq!(got, Some(args(&["ECHO", "hello"])));
            }
        }
        assert!(buf.is_empty());
    }

    #[test]
    fn an_inline_line_trickling_in_is_searched_once() {
        let mut decoder = Decoder::new(LIMITS);
        let mut buf = BytesMut::new();
        for byte in b"PING  hello\r" {
            buf.extend_from_slice(&[*byte]);
            assert_eq!(decoder.decode(&mut buf).unwrap(), None);
        }
        assert_eq!(
            decoder.scanned,
            buf.len(),
            "the searched part is remembered"
        );
        buf.extend_from_slice(b"\n*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            decoder.decode(&mut buf).unwrap(),
            Some(args(&["PING", "hello"]))
        );
        assert_eq!(decoder.decode(&mut buf).unwrap(), Some(args(&["PING"])));
        assert!(buf.is_empty());
    }

    #[test]
    fn limits_and_malformed_headers_are_protocol_errors() {
        let err = |input: &[u8]| all(input).unwrap_err().0;
        assert_eq!(err(b"*5\r\n"), "5 arguments, above the maximum of 4");
        assert_eq!(
            err(b"*1\r\n$9\r\n"),
            "an argument of 9 bytes, above the maximum of 8"
        );
        assert_eq!(
            err(b"*2\r\n$8\r\n12345678\r\n$8\r\n"),
            "a command of more than 12 bytes"
        );
        assert_eq!(err(b"*x\r\n"), "invalid multibulk length");
        assert_eq!(err(b"*1\r\n$-1\r\n"), "invalid bulk length");
        assert_eq!(err(b"*1\r\n:1\r\n"), "expected '$', got ':'");
        assert_eq!(
            err(b"*1\r\n$2\r\nabcd"),
            "expected CRLF after a bulk string"
        );
        assert_eq!(err(b"a b c d e\r\n"), "5 arguments, above the maximum of 4");
        let long = vec![b'a'; MAX_LINE + 3];
        assert_eq!(err(&long), "too big inline request");
    }

    /// Decodes `input` fed in pieces split at `cuts`: the commands, then the error if any.
    fn chunked(input: &[u8], cuts: &[usize]) -> (Vec<Vec<Bytes>>, Option<ProtocolError>) {
        let mut decoder = Decoder::new(LIMITS);
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut at = 0;
        let mut ends: Vec<usize> = cuts.iter().map(|c| c % (input.len() + 1)).collect();
        ends.sort_unstable();
        ends.push(input.len());
        for end in ends {
            buf.extend_from_slice(&input[at..end.max(at)]);
            at = end.max(at);
            loop {
                match decoder.decode(&mut buf) {
                    Ok(Some(cmd)) => out.push(cmd),
                    Ok(None) => break,
                    Err(e) => return (out, Some(e)),
                }
            }
        }
        (out, None)
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_in_any_pieces_decode_as_in_one_piece(
            input in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::sample::select(b"*$\r\n0123456789- ab".to_vec()),
                    proptest::num::u8::ANY,
                ],
                0..200,
            ),
            cuts in proptest::collection::vec(0usize..400, 0..8),
        ) {
            let whole = chunked(&input, &[]);
            let pieces = chunked(&input, &cuts);
            proptest::prop_assert_eq!(whole, pieces);
        }
    }
}
