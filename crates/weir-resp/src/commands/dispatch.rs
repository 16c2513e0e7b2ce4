//! Dispatch: one command's arguments → its handler, with Redis's unknown-command and
//! arity errors word for word, each decision bounded by the request timeout; and the
//! small argument helpers every handler shares.

use bytes::Bytes;
use weir_engine::Engine;

use super::args::wrong_arity;
use super::table::{find, Kind};
use super::{cell, check, crab, introspect, session, Session};
use crate::protocol::Reply;
use crate::settings::Settings;

/// What every command may use: the engine (its limiter, its rules) and the settings.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) settings: Settings,
}

/// Runs one command. `args[0]` is its name; `args` is never empty.
pub(crate) async fn run(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
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
        Kind::Cell => bounded(timeout, cell::throttle(&shared.engine.limiter(), args)).await,
        Kind::Crab => bounded(timeout, crab::throttle(&shared.engine.limiter(), args)).await,
        Kind::Check => bounded(timeout, check::check(&shared.engine, args)).await,
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
