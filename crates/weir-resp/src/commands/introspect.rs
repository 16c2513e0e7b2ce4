//! `COMMAND` (Redis 7's ten-field entries), `COMMAND COUNT`, `COMMAND LIST`,
//! `COMMAND INFO name …` and `COMMAND DOCS [name …]`: what `redis-cli` and client
//! libraries ask to learn the commands, built from the one table in `mod.rs`.

use bytes::Bytes;

use super::args::lossy;
use super::table::{find, Spec, COMMANDS};
use crate::protocol::Reply;

/// `COMMAND [COUNT | LIST | INFO name … | DOCS [name …]]`.
pub(crate) fn command(args: &[Bytes]) -> Reply {
    let Some(sub) = args.get(1) else {
        return Reply::Array(COMMANDS.iter().map(info).collect());
    };
    let names = &args[2..];
    match String::from_utf8_lossy(sub).to_ascii_lowercase().as_str() {
        "count" => Reply::Int(i64::try_from(COMMANDS.len()).unwrap_or(i64::MAX)),
        "list" => Reply::Array(COMMANDS.iter().map(|s| Reply::name(s.name)).collect()),
        "info" => Reply::Array(
            names
                .iter()
                .map(|name| find(name).map_or(Reply::Null, info))
                .collect(),
        ),
        "docs" if names.is_empty() => Reply::Map(
            COMMANDS
                .iter()
                .map(|s| (Reply::name(s.name), docs(s)))
                .collect(),
        ),
        "docs" => Reply::Map(
            names
                .iter()
                .filter_map(|name| find(name))
                .map(|s| (Reply::name(s.name), docs(s)))
                .collect(),
        ),
        _ => Reply::error(format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            lossy(sub)
        )),
    }
}

/// A Redis 7 `COMMAND` entry.
fn info(spec: &Spec) -> Reply {
    let key = i64::from(spec.args.first().is_some_and(|(_, kind)| *kind == "key"));
    Reply::Array(vec![
        Reply::name(spec.name),
        Reply::Int(spec.arity),
        Reply::Array(spec.flags.iter().map(|f| Reply::Simple(f)).collect()),
        Reply::Int(key),
        Reply::Int(key),
        Reply::Int(key),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
        Reply::Array(Vec::new()),
    ])
}

/// A `COMMAND DOCS` entry.
fn docs(spec: &Spec) -> Reply {
    let arguments = spec
        .args
        .iter()
        .map(|(name, kind)| {
            Reply::Map(vec![
                (Reply::name("name"), Reply::name(name)),
                (Reply::name("type"), Reply::name(kind)),
                (Reply::name("display_text"), Reply::name(name)),
            ])
        })
        .collect();
    Reply::Map(vec![
        (Reply::name("summary"), Reply::name(spec.summary)),
        (Reply::name("since"), Reply::name("0.1.0")),
        (
            Reply::name("group"),
            Reply::name(if spec.name.contains('.') || spec.name == "throttle" {
                "module"
            } else {
                "connection"
            }),
        ),
        (Reply::name("complexity"), Reply::name("O(1)")),
        (Reply::name("arguments"), Reply::Array(arguments)),
    ])
}
