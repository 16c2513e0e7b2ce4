//! Commands: the table of what the front end answers, Redis's arity and unknown-command
//! errors, and the dispatch of one command's arguments to its handler. One file per group:
//! `cell.rs` (`CL.THROTTLE`, redis-cell), `crab.rs` (`THROTTLE`, throttlecrab),
//! `check.rs` (`WEIR.CHECK`, the rule files), `session.rs` (`PING`, `HELLO`, `CLIENT`, …),
//! `introspect.rs` (`COMMAND`, `COMMAND DOCS`). Handlers build a `Reply`; they never see
//! bytes on the wire.

mod cell;
mod check;
mod crab;
mod introspect;
mod session;

use bytes::Bytes;
use weir_core::{Clock, Limiter, Store};

pub(crate) use session::Session;

use crate::protocol::Reply;
use crate::rules::Rules;
use crate::settings::Settings;

/// What every command may use: the limiter, the rules and the settings.
pub(crate) struct Shared<L, R> {
    pub(crate) limiter: L,
    pub(crate) rules: R,
    pub(crate) settings: Settings,
}

/// One command the front end knows.
pub(crate) struct Spec {
    /// Lower case, as `COMMAND` lists it.
    pub(crate) name: &'static str,
    /// Redis's convention: `n` exactly n arguments (the name included), `-n` at least n.
    pub(crate) arity: i64,
    /// `COMMAND`'s flags.
    pub(crate) flags: &'static [&'static str],
    /// `COMMAND DOCS`' one-line summary.
    pub(crate) summary: &'static str,
    /// `COMMAND DOCS`' arguments: (name, type).
    pub(crate) args: &'static [(&'static str, &'static str)],
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cell,
    Crab,
    Check,
    Ping,
    Echo,
    Hello,
    Client,
    Command,
    Quit,
    Select,
    Reset,
    Auth,
    Config,
}

/// Every command, in `COMMAND`'s order.
pub(crate) const COMMANDS: &[Spec] = &[
    Spec {
        name: "cl.throttle",
        // redis-cell registers no arity and answers its own usage error.
        arity: -1,
        flags: &["write"],
        summary: "redis-cell's GCRA check: [limited, limit, remaining, retry_after, reset_after]",
        args: &[
            ("key", "key"),
            ("max_burst", "integer"),
            ("count_per_period", "integer"),
            ("period", "integer"),
            ("quantity", "integer"),
        ],
        kind: Kind::Cell,
    },
    Spec {
        name: "throttle",
        arity: -5,
        flags: &["write"],
        summary: "throttlecrab's GCRA check: [allowed, limit, remaining, reset_after, retry_after]",
        args: &[
            ("key", "key"),
            ("max_burst", "integer"),
            ("count_per_period", "integer"),
            ("period", "integer"),
            ("quantity", "integer"),
        ],
        kind: Kind::Crab,
    },
    Spec {
        name: "weir.check",
        arity: -4,
        flags: &["write"],
        summary: "One descriptor checked against the rule files, answered as POST /v1/check",
        args: &[
            ("domain", "string"),
            ("key", "string"),
            ("value", "string"),
            ("HITS n", "integer"),
        ],
        kind: Kind::Check,
    },
    spec(
        "ping",
        -1,
        "Answers PONG, or the message",
        &[("message", "string")],
        Kind::Ping,
    ),
    spec(
        "echo",
        2,
        "Answers the message",
        &[("message", "string")],
        Kind::Echo,
    ),
    spec(
        "hello",
        -1,
        "Chooses RESP2 or RESP3 and describes the server",
        &[("protover", "integer")],
        Kind::Hello,
    ),
    spec(
        "client",
        -2,
        "SETNAME, GETNAME, SETINFO, ID, INFO, LIST, NO-EVICT, NO-TOUCH",
        &[("subcommand", "string")],
        Kind::Client,
    ),
    spec(
        "command",
        -1,
        "COMMAND, COMMAND COUNT, COMMAND DOCS, COMMAND INFO, COMMAND LIST",
        &[("subcommand", "string")],
        Kind::Command,
    ),
    spec(
        "quit",
        -1,
        "Answers OK and closes the connection",
        &[],
        Kind::Quit,
    ),
    spec(
        "select",
        2,
        "Only database 0 exists",
        &[("index", "integer")],
        Kind::Select,
    ),
    spec("reset", 1, "Back to RESP2 without a name", &[], Kind::Reset),
    spec(
        "auth",
        -2,
        "No password is configured",
        &[("password", "string")],
        Kind::Auth,
    ),
    spec(
        "config",
        -2,
        "CONFIG GET answers no parameters",
        &[("subcommand", "string")],
        Kind::Config,
    ),
];

const fn spec(
    name: &'static str,
    arity: i64,
    summary: &'static str,
    args: &'static [(&'static str, &'static str)],
    kind: Kind,
) -> Spec {
    Spec {
        name,
        arity,
        flags: &["fast"],
        summary,
        args,
        kind,
    }
}

/// The spec of the command `name` (any case).
pub(crate) fn find(name: &[u8]) -> Option<&'static Spec> {
    COMMANDS
        .iter()
        .find(|spec| spec.name.as_bytes().eq_ignore_ascii_case(name))
}

/// Runs one command. `args[0]` is its name; `args` is never empty.
pub(crate) async fn run<L, S, C, R>(
    shared: &Shared<L, R>,
    session: &mut Session,
    args: &[Bytes],
) -> Reply
where
    L: std::ops::Deref<Target = Limiter<S, C>>,
    S: Store,
    C: Clock,
    R: Rules,
{
    let Some(name) = args.first() else {
        return Reply::error("ERR empty command");
    };
    let Some(spec) = find(name) else {
        return unknown(args);
    };
    let n = i64::try_from(args.len()).unwrap_or(i64::MAX);
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return wrong_arity(spec.name);
    }
    let timeout = shared.settings.request_timeout;
    match spec.kind {
        Kind::Cell => bounded(timeout, cell::throttle(&shared.limiter, args)).await,
        Kind::Crab => bounded(timeout, crab::throttle(&shared.limiter, args)).await,
        Kind::Check => {
            bounded(
                timeout,
                check::check(&shared.limiter, &shared.rules, shared.settings.shadow, args),
            )
            .await
        }
        Kind::Ping => session::ping(args),
        Kind::Echo => args.get(1).map_or(Reply::Null, |m| Reply::Bulk(m.clone())),
        Kind::Hello => session::hello(session, args),
        Kind::Client => session::client(session, args),
        Kind::Command => introspect::command(args),
        Kind::Quit => {
            session.quit = true;
            Reply::OK
        }
        Kind::Select => session::select(args),
        Kind::Reset => session.reset(),
        Kind::Auth => session::auth(args),
        Kind::Config => session::config(args),
    }
}

/// A decision bounded by the request timeout.
async fn bounded(
    timeout: std::time::Duration,
    decide: impl std::future::Future<Output = Reply>,
) -> Reply {
    match tokio::time::timeout(timeout, decide).await {
        Ok(reply) => reply,
        Err(_) => Reply::error(format!(
            "ERR no decision within {} ms (the store is slow or unreachable)",
            timeout.as_millis()
        )),
    }
}

/// Redis's answer to a command it does not know, word for word.
fn unknown(args: &[Bytes]) -> Reply {
    let mut listed = String::new();
    for arg in args.iter().skip(1) {
        if listed.len() >= 128 {
            break;
        }
        let room = 128 - listed.len();
        let text = String::from_utf8_lossy(arg);
        let cut: String = text.chars().take(room).collect();
        listed.push_str(&format!("'{cut}' "));
    }
    let name = String::from_utf8_lossy(&args[0]);
    let name: String = name.chars().take(128).collect();
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

/// Redis's arity error, word for word (`name` as `COMMAND` lists it).
pub(crate) fn wrong_arity(name: &str) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{name}' command"
    ))
}

/// An argument as text, for messages.
pub(crate) fn lossy(arg: &[u8]) -> String {
    String::from_utf8_lossy(arg).into_owned()
}

/// An argument as Rust parses an `i64` (`+5` and `-5` included, spaces not): what both
/// redis-cell and throttlecrab accept.
pub(crate) fn int(arg: &[u8]) -> Option<i64> {
    std::str::from_utf8(arg).ok()?.parse().ok()
}
