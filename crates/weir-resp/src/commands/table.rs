//! The table of commands the front end answers: name, Redis arity, `COMMAND`'s flags and
//! `COMMAND DOCS`' summary and arguments, and which handler runs each. The one list that
//! dispatch (`dispatch.rs`) and introspection (`introspect.rs`) read.

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
    /// Which handler runs it.
    pub(crate) kind: Kind,
}

/// The handlers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
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
    Info,
    Multi,
    Exec,
    Discard,
    Watch,
    Unwatch,
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
        "Authenticates the connection (--resp-password-file)",
        &[("password", "string")],
        Kind::Auth,
    ),
    spec(
        "info",
        -1,
        "Redis's INFO sections: server, clients, persistence, stats, keyspace",
        &[("section", "string")],
        Kind::Info,
    ),
    spec(
        "multi",
        1,
        "Starts a transaction: commands are queued until EXEC",
        &[],
        Kind::Multi,
    ),
    spec(
        "exec",
        1,
        "Runs the queued commands in order, or none if one was refused",
        &[],
        Kind::Exec,
    ),
    spec(
        "discard",
        1,
        "Drops the queued commands",
        &[],
        Kind::Discard,
    ),
    spec(
        "watch",
        -2,
        "Refused: there are no values to watch",
        &[("key", "key")],
        Kind::Watch,
    ),
    spec("unwatch", 1, "Nothing is watched: OK", &[], Kind::Unwatch),
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
