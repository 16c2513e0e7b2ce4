//! The connection's own commands, as clients send them when they connect and as Redis
//! answers them: `PING`, `HELLO` (RESP2 / RESP3, `AUTH` and `SETNAME` accepted), `CLIENT`
//! (`SETNAME`, `GETNAME`, `SETINFO`, `ID`, `INFO`, `LIST`, `NO-EVICT`, `NO-TOUCH`, `HELP`),
//! `SELECT 0`, `RESET` and `CONFIG GET` (no parameters: `redis-benchmark` asks for two at
//! start). [`Session`] is what they change (`AUTH` is `auth.rs`, `MULTI` / `EXEC`
//! `transaction.rs`).

use bytes::Bytes;

use super::args::{int, lossy, wrong_arity};
use crate::protocol::{Proto, Reply};

/// One connection's state.
#[derive(Debug)]
pub(crate) struct Session {
    pub(crate) id: u64,
    pub(crate) proto: Proto,
    pub(crate) name: Option<Bytes>,
    /// Set by `QUIT`: close once the reply is written.
    pub(crate) quit: bool,
    /// Whether commands may run: always without a password, after `AUTH` with one.
    pub(crate) authenticated: bool,
    /// Wrong passwords given on this connection (each one answered later than the last).
    pub(crate) failed_auths: u32,
    /// Between `MULTI` and `EXEC` / `DISCARD`: the commands queued.
    pub(crate) transaction: Option<super::transaction::Queue>,
}

impl Session {
    /// A new connection's session; `authenticated` when no password is required.
    pub(crate) fn new(id: u64, authenticated: bool) -> Self {
        Self {
            id,
            proto: Proto::Resp2,
            name: None,
            quit: false,
            authenticated,
            failed_auths: 0,
            transaction: None,
        }
    }

    /// `RESET`: RESP2, no name, no transaction, and (as Redis does) back to the default
    /// user, which must `AUTH` again when a password is required.
    pub(crate) fn reset(&mut self, password_required: bool) -> Reply {
        self.proto = Proto::Resp2;
        self.name = None;
        self.transaction = None;
        self.authenticated = !password_required;
        Reply::Simple("RESET")
    }

    fn info(&self) -> String {
        let name = self.name.as_deref().map(lossy).unwrap_or_default();
        let resp = if self.proto == Proto::Resp3 { 3 } else { 2 };
        format!(
            "id={} name={name} db=0 resp={resp} lib-name= lib-ver=\n",
            self.id
        )
    }
}

/// `PING [message]`.
pub(crate) fn ping(args: &[Bytes]) -> Reply {
    match args {
        [_] => Reply::Simple("PONG"),
        [_, message] => Reply::Bulk(message.clone()),
        _ => wrong_arity("ping"),
    }
}

/// `HELLO [protover [AUTH username password] [SETNAME clientname]]`: its options parsed,
/// the credentials given (`AUTH`), or the error to answer.
pub(crate) struct Hello {
    proto: Proto,
    name: Option<Bytes>,
    /// `AUTH username password`.
    pub(crate) credentials: Option<(Bytes, Bytes)>,
}

/// Parses `HELLO`'s arguments with Redis's errors.
pub(crate) fn parse_hello(session: &Session, args: &[Bytes]) -> Result<Hello, Reply> {
    let mut proto = session.proto;
    let mut name = None;
    let mut credentials = None;
    if let Some(version) = args.get(1) {
        proto = match int(version) {
            Some(2) => Proto::Resp2,
            Some(3) => Proto::Resp3,
            Some(_) => return Err(Reply::error("NOPROTO unsupported protocol version")),
            None => {
                return Err(Reply::error(
                    "ERR Protocol version is not an integer or out of range",
                ))
            }
        };
        let mut rest = &args[2..];
        while let Some((option, tail)) = rest.split_first() {
            if option.eq_ignore_ascii_case(b"AUTH") && tail.len() >= 2 {
                credentials = Some((tail[0].clone(), tail[1].clone()));
                rest = &tail[2..];
            } else if option.eq_ignore_ascii_case(b"SETNAME") && !tail.is_empty() {
                if !valid_name(&tail[0]) {
                    return Err(bad_name());
                }
                name = Some(tail[0].clone());
                rest = &tail[1..];
            } else {
                return Err(Reply::error(format!(
                    "ERR Syntax error in HELLO option '{}'",
                    lossy(option)
                )));
            }
        }
    }
    Ok(Hello {
        proto,
        name,
        credentials,
    })
}

/// Applies a parsed `HELLO` (its credentials already checked) and describes the server.
pub(crate) fn hello(session: &mut Session, hello: Hello) -> Reply {
    let Hello { proto, name, .. } = hello;
    session.proto = proto;
    if name.is_some() {
        session.name = name;
    }
    Reply::Map(vec![
        (Reply::name("server"), Reply::name("weir")),
        (
            Reply::name("version"),
            Reply::name(env!("CARGO_PKG_VERSION")),
        ),
        (
            Reply::name("proto"),
            Reply::Int(if proto == Proto::Resp3 { 3 } else { 2 }),
        ),
        (
            Reply::name("id"),
            Reply::Int(i64::try_from(session.id).unwrap_or(i64::MAX)),
        ),
        (Reply::name("mode"), Reply::name("standalone")),
        (Reply::name("role"), Reply::name("master")),
        (Reply::name("modules"), Reply::Array(Vec::new())),
    ])
}

/// Redis's rule for client names: printable ASCII without spaces.
fn valid_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

fn bad_name() -> Reply {
    Reply::error("ERR Client names cannot contain spaces, newlines or special characters.")
}

/// `CLIENT subcommand …`.
pub(crate) fn client(session: &mut Session, args: &[Bytes]) -> Reply {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let arity = |n: usize| {
        if args.len() == n {
            None
        } else {
            Some(wrong_arity(&format!("client|{sub}")))
        }
    };
    match sub.as_str() {
        "setname" => arity(3).unwrap_or_else(|| {
            if !valid_name(&args[2]) {
                return bad_name();
            }
            session.name = (!args[2].is_empty()).then(|| args[2].clone());
            Reply::OK
        }),
        "getname" => {
            arity(2).unwrap_or_else(|| session.name.clone().map_or(Reply::Null, Reply::Bulk))
        }
        "setinfo" => arity(4).unwrap_or_else(|| {
            let attr = &args[2];
            if attr.eq_ignore_ascii_case(b"lib-name") || attr.eq_ignore_ascii_case(b"lib-ver") {
                Reply::OK
            } else {
                Reply::error(format!("ERR Unrecognized option '{}'", lossy(attr)))
            }
        }),
        "id" => {
            arity(2).unwrap_or_else(|| Reply::Int(i64::try_from(session.id).unwrap_or(i64::MAX)))
        }
        "info" | "list" => Reply::text(session.info()),
        "no-evict" | "no-touch" => arity(3).unwrap_or_else(|| {
            if args[2].eq_ignore_ascii_case(b"on") || args[2].eq_ignore_ascii_case(b"off") {
                Reply::OK
            } else {
                Reply::error("ERR syntax error")
            }
        }),
        "help" => Reply::Array(
            [
                "CLIENT <subcommand> [<arg> ...]. Subcommands are:",
                "GETNAME, SETNAME <name>, SETINFO <LIB-NAME|LIB-VER> <value>, ID, INFO, LIST,",
                "NO-EVICT <ON|OFF>, NO-TOUCH <ON|OFF>, HELP",
            ]
            .into_iter()
            .map(Reply::name)
            .collect(),
        ),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try CLIENT HELP.",
            lossy(&args[1])
        )),
    }
}

/// `SELECT index`: only database 0.
pub(crate) fn select(args: &[Bytes]) -> Reply {
    match int(&args[1]) {
        Some(0) => Reply::OK,
        Some(_) => Reply::error("ERR DB index is out of range"),
        None => Reply::error("ERR value is not an integer or out of range"),
    }
}

/// `CONFIG GET parameter …`: `save` (none) and `appendonly` (no), what
/// `redis-benchmark` asks at start; nothing else matches.
pub(crate) fn config(args: &[Bytes]) -> Reply {
    if args[1].eq_ignore_ascii_case(b"get") {
        if args.len() < 3 {
            return wrong_arity("config|get");
        }
        let known = [("save", ""), ("appendonly", "no")];
        let found = known
            .into_iter()
            .filter(|(name, _)| {
                args[2..]
                    .iter()
                    .any(|a| a.eq_ignore_ascii_case(name.as_bytes()))
            })
            .map(|(name, value)| (Reply::name(name), Reply::name(value)))
            .collect();
        return Reply::Map(found);
    }
    Reply::error(format!(
        "ERR unknown subcommand '{}'. Try CONFIG HELP.",
        lossy(&args[1])
    ))
}
