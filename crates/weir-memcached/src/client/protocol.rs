//! memcached's text protocol: the few commands a decision needs, encoded to bytes, and their
//! replies parsed from a buffered stream. Pure framing: no pooling, no timeouts, no retries
//! (those are in `pool.rs`); what a reply *means* for a decision is decided in `plan.rs`.

use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt};
use weir_core::StoreError;

/// The largest value this client accepts in a reply (memcached's default item limit is
/// 1 MiB); anything larger means the stream is not what we think it is.
const MAX_VALUE_LEN: usize = 2 * 1024 * 1024;
/// The longest reply line accepted (a `VALUE` header is under 300 bytes).
const MAX_LINE_LEN: usize = 4096;

/// One command. Keys are already safe memcached keys (see `keys.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Command {
    /// `gets k1 k2 …`: values with their CAS uniques, absent keys omitted.
    Gets(Vec<String>),
    /// `add`: store only if absent.
    Add {
        key: String,
        ttl_s: u32,
        data: Vec<u8>,
    },
    /// `cas`: store only if unchanged since the `gets` that returned `unique`.
    Cas {
        key: String,
        ttl_s: u32,
        data: Vec<u8>,
        unique: u64,
    },
    /// `incr`: add to a decimal value, atomically.
    Incr { key: String, delta: u64 },
    /// `decr`: subtract, stopping at zero, atomically.
    Decr { key: String, delta: u64 },
    /// `version`: the health probe.
    Version,
}

/// One value of a `gets` reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Value {
    pub key: String,
    pub data: Vec<u8>,
    pub unique: u64,
}

/// A reply, one per command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    Values(Vec<Value>),
    Stored,
    NotStored,
    Exists,
    NotFound,
    /// `incr`/`decr` on a value that is not a number (an empty tombstone, see `plan.rs`).
    NonNumeric,
    Number(u64),
    Version(String),
}

impl Command {
    /// Appends the command's bytes to `out` (no allocation beyond `out` growing).
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        use std::io::Write;
        // Writing to a `Vec` cannot fail.
        let _ = match self {
            Command::Gets(keys) => {
                out.extend_from_slice(b"gets");
                for key in keys {
                    out.push(b' ');
                    out.extend_from_slice(key.as_bytes());
                }
                out.extend_from_slice(b"\r\n");
                Ok(())
            }
            Command::Add { key, ttl_s, data } => {
                let head = write!(out, "add {key} 0 {ttl_s} {}\r\n", data.len());
                out.extend_from_slice(data);
                out.extend_from_slice(b"\r\n");
                head
            }
            Command::Cas {
                key,
                ttl_s,
                data,
                unique,
            } => {
                let head = write!(out, "cas {key} 0 {ttl_s} {} {unique}\r\n", data.len());
                out.extend_from_slice(data);
                out.extend_from_slice(b"\r\n");
                head
            }
            Command::Incr { key, delta } => write!(out, "incr {key} {delta}\r\n"),
            Command::Decr { key, delta } => write!(out, "decr {key} {delta}\r\n"),
            Command::Version => write!(out, "version\r\n"),
        };
    }

    /// What its reply looks like.
    pub(crate) fn kind(&self) -> Kind {
        match self {
            Command::Gets(_) => Kind::Gets,
            Command::Add { .. } => Kind::Add,
            Command::Cas { .. } => Kind::Cas,
            Command::Incr { .. } => Kind::Incr,
            Command::Decr { .. } => Kind::Decr,
            Command::Version => Kind::Version,
        }
    }
}

/// A command's name, all a reply's parser needs of it (so a connection can keep it for
/// each command in flight without keeping the command).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Gets,
    Add,
    Cas,
    Incr,
    Decr,
    Version,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Gets => "gets",
            Kind::Add => "add",
            Kind::Cas => "cas",
            Kind::Incr => "incr",
            Kind::Decr => "decr",
            Kind::Version => "version",
        }
    }
}

fn broken(what: impl std::fmt::Display) -> StoreError {
    StoreError::Unavailable(format!("memcached protocol: {what}"))
}

/// Reads one `\r\n`-terminated line, without the terminator.
async fn read_line<R: AsyncBufRead + Unpin>(r: &mut R) -> Result<String, StoreError> {
    let mut buf = Vec::new();
    let n = (&mut *r)
        .take(u64::try_from(MAX_LINE_LEN).unwrap_or(u64::MAX))
        .read_until(b'\n', &mut buf)
        .await
        .map_err(|e| StoreError::Unavailable(format!("memcached read: {e}")))?;
    if n == 0 {
        return Err(StoreError::Unavailable(
            "memcached closed the connection".to_owned(),
        ));
    }
    if !buf.ends_with(b"\r\n") {
        return Err(broken("reply line too long or unterminated"));
    }
    buf.truncate(buf.len() - 2);
    String::from_utf8(buf).map_err(|_| broken("reply line is not UTF-8"))
}

/// The error lines every command may get instead of its reply.
fn error_line(command: Kind, line: &str) -> Option<StoreError> {
    if line == "ERROR" {
        return Some(broken(format!("{} rejected: ERROR", command.name())));
    }
    if let Some(msg) = line.strip_prefix("CLIENT_ERROR ") {
        return Some(broken(format!("{}: CLIENT_ERROR {msg}", command.name())));
    }
    line.strip_prefix("SERVER_ERROR ").map(|msg| {
        StoreError::Unavailable(format!("memcached {}: SERVER_ERROR {msg}", command.name()))
    })
}

/// Reads the reply to a command of this kind.
pub(crate) async fn read_reply<R: AsyncBufRead + Unpin>(
    r: &mut R,
    command: Kind,
) -> Result<Reply, StoreError> {
    let line = read_line(r).await?;
    let counting = matches!(command, Kind::Incr | Kind::Decr);
    if counting && line.starts_with("CLIENT_ERROR") && line.contains("non-numeric") {
        return Ok(Reply::NonNumeric);
    }
    if let Some(err) = error_line(command, &line) {
        return Err(err);
    }
    let reply = match command {
        Kind::Gets => return read_values(r, line).await,
        Kind::Add | Kind::Cas => match line.as_str() {
            "STORED" => Reply::Stored,
            "NOT_STORED" => Reply::NotStored,
            "EXISTS" => Reply::Exists,
            "NOT_FOUND" => Reply::NotFound,
            _ => return Err(broken(format!("unexpected reply to store: {line:?}"))),
        },
        Kind::Incr | Kind::Decr => match line.as_str() {
            "NOT_FOUND" => Reply::NotFound,
            n => Reply::Number(
                parse_number(n.as_bytes())
                    .ok_or_else(|| broken(format!("unexpected reply to incr/decr: {line:?}")))?,
            ),
        },
        Kind::Version => match line.strip_prefix("VERSION ") {
            Some(v) => Reply::Version(v.to_owned()),
            None => return Err(broken(format!("unexpected reply to version: {line:?}"))),
        },
    };
    Ok(reply)
}

async fn read_values<R: AsyncBufRead + Unpin>(
    r: &mut R,
    first: String,
) -> Result<Reply, StoreError> {
    let mut values = Vec::new();
    let mut line = first;
    loop {
        if line == "END" {
            return Ok(Reply::Values(values));
        }
        let header = line
            .strip_prefix("VALUE ")
            .ok_or_else(|| broken(format!("unexpected line in gets reply: {line:?}")))?;
        let fields: Vec<&str> = header.split(' ').collect();
        let (key, len, unique) = match fields.as_slice() {
            [key, _flags, len, unique] => (*key, *len, *unique),
            _ => return Err(broken(format!("malformed VALUE line: {line:?}"))),
        };
        let len: usize = len.parse().map_err(|_| broken("bad value length"))?;
        if len > MAX_VALUE_LEN {
            return Err(broken(format!("value of {len} bytes is too large")));
        }
        let unique: u64 = unique.parse().map_err(|_| broken("bad cas unique"))?;
        let mut data = vec![0u8; len + 2];
        r.read_exact(&mut data)
            .await
            .map_err(|e| StoreError::Unavailable(format!("memcached read: {e}")))?;
        if !data.ends_with(b"\r\n") {
            return Err(broken("value not followed by CRLF"));
        }
        data.truncate(len);
        values.push(Value {
            key: key.to_owned(),
            data,
            unique,
        });
        line = read_line(r).await?;
    }
}

/// A decimal counter as memcached stores it. `incr`/`decr` may leave trailing spaces when a
/// number gets shorter, so they are ignored.
pub(crate) fn parse_number(bytes: &[u8]) -> Option<u64> {
    let digits = bytes.trim_ascii_end();
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(command: &Command, wire: &[u8]) -> Result<Reply, StoreError> {
        let mut r = tokio::io::BufReader::new(wire);
        read_reply(&mut r, command.kind()).await
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    #[test]
    fn encodes_storage_commands_with_their_data() {
        let mut out = Vec::new();
        Command::Cas {
            key: "k".into(),
            ttl_s: 5,
            data: b"ab".to_vec(),
            unique: 9,
        }
        .encode(&mut out);
        Command::Gets(vec!["a".into(), "b".into()]).encode(&mut out);
        assert_eq!(out, b"cas k 0 5 2 9\r\nab\r\ngets a b\r\n");
    }

    #[test]
    fn parses_a_multi_get_with_binary_values() {
        let wire = b"VALUE a 0 3 7\r\n\r\n\x00\r\nVALUE b 0 1 8\r\n5\r\nEND\r\n";
        let got = rt().block_on(parse(&Command::Gets(vec![]), wire)).unwrap();
        assert_eq!(
            got,
            Reply::Values(vec![
                Value {
                    key: "a".into(),
                    data: b"\r\n\x00".to_vec(),
                    unique: 7
                },
                Value {
                    key: "b".into(),
                    data: b"5".to_vec(),
                    unique: 8
                },
            ])
        );
    }

    #[test]
    fn counters_may_carry_trailing_spaces() {
        assert_eq!(parse_number(b"9  "), Some(9));
        assert_eq!(parse_number(b"x"), None);
        assert_eq!(parse_number(b""), None);
    }

    #[test]
    fn error_lines_become_store_errors() {
        let incr = Command::Incr {
            key: "k".into(),
            delta: 1,
        };
        let rt = rt();
        assert_eq!(
            rt.block_on(parse(
                &incr,
                b"CLIENT_ERROR cannot increment or decrement non-numeric value\r\n"
            )),
            Ok(Reply::NonNumeric)
        );
        assert!(matches!(
            rt.block_on(parse(&incr, b"CLIENT_ERROR bad command line format\r\n")),
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(
            rt.block_on(parse(&incr, b"SERVER_ERROR out of memory\r\n")),
            Err(StoreError::Unavailable(_))
        ));
        assert!(matches!(
            rt.block_on(parse(&incr, b"")),
            Err(StoreError::Unavailable(_))
        ));
        assert_eq!(rt.block_on(parse(&incr, b"42\r\n")), Ok(Reply::Number(42)));
    }
}
