//! Dispatch: one command's arguments → its handler. In order, as Redis checks them: the
//! command is known and its arity right (Redis's errors word for word), the connection
//! authenticated when a password is required (`-NOAUTH`), then inside `MULTI` it is
//! queued (`transaction.rs`) once its arguments parse, else it runs. Each decision is
//! bounded by the request timeout and counted in `/metrics` as `api="resp"`.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use weir_core::Clock as _;
use weir_engine::Engine;

use super::args::wrong_arity;
use super::info::Stats;
use super::table::{find, Kind};
use super::{auth, cell, check, crab, info, introspect, session, transaction, Session};
use crate::protocol::Reply;
use crate::settings::Settings;

/// What every command may use: the engine (its limiter, its rules), the settings, the
/// counters `INFO` shows and the gate that spaces out wrong passwords.
pub(crate) struct Shared {
    pub(crate) engine: Engine,
    pub(crate) settings: Settings,
    pub(crate) stats: Stats,
    pub(crate) auth_gate: tokio::sync::Mutex<()>,
}

impl Shared {
    pub(crate) fn new(engine: Engine, settings: Settings) -> Self {
        let now_ns = engine.limiter().clock().now_ns();
        Self {
            engine,
            settings,
            stats: Stats::new(now_ns),
            auth_gate: tokio::sync::Mutex::new(()),
        }
    }
}

/// How a decision command ended, for `weir_requests_total{api="resp", result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    Ok,
    OverLimit,
    /// Bad arguments.
    Invalid,
    /// The store failed, or no decision in time.
    Error,
}

impl Outcome {
    fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::OverLimit => "over_limit",
            Outcome::Invalid => "invalid",
            Outcome::Error => "error",
        }
    }
}

/// Runs one command. `args[0]` is its name; `args` is never empty.
pub(crate) async fn run(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    shared.stats.command();
    let refused = |session: &mut Session, reply: Reply| {
        // A refused command inside MULTI makes EXEC run nothing, as in Redis.
        if let Some(queue) = session.transaction.as_mut() {
            queue.aborted = true;
        }
        reply
    };
    let Some(name) = args.first() else {
        return refused(session, Reply::error("ERR empty command"));
    };
    let Some(spec) = find(name) else {
        return refused(session, unknown(args));
    };
    let n = i64::try_from(args.len()).unwrap_or(i64::MAX);
    if (spec.arity > 0 && n != spec.arity) || (spec.arity < 0 && n < -spec.arity) {
        return refused(session, wrong_arity(spec.name));
    }
    if !session.authenticated
        && !matches!(
            spec.kind,
            Kind::Auth | Kind::Hello | Kind::Ping | Kind::Quit
        )
    {
        return refused(session, auth::noauth());
    }
    if session.transaction.is_some() {
        match spec.kind {
            Kind::Exec | Kind::Discard | Kind::Multi | Kind::Watch | Kind::Quit | Kind::Reset => {}
            kind => {
                if let Err(reply) = validate(&shared.settings, kind, args) {
                    return refused(session, reply);
                }
                return match session.transaction.as_mut() {
                    Some(queue) => queue.push(args),
                    None => Reply::error("ERR EXEC without MULTI"),
                };
            }
        }
    }
    match spec.kind {
        Kind::Exec => exec(shared, session).await,
        Kind::Multi => transaction::multi(&mut session.transaction),
        Kind::Discard => transaction::discard(&mut session.transaction),
        Kind::Watch => transaction::watch(session.transaction.is_some()),
        kind => execute(shared, session, kind, args).await,
    }
}

/// `EXEC`: the queued commands in order, their replies as one array.
async fn exec(shared: &Shared, session: &mut Session) -> Reply {
    let commands = match transaction::take(&mut session.transaction) {
        Ok(commands) => commands,
        Err(reply) => return reply,
    };
    let mut replies = Vec::with_capacity(commands.len());
    for args in &commands {
        let kind = args.first().and_then(|name| find(name)).map(|s| s.kind);
        replies.push(match kind {
            Some(kind) => execute(shared, session, kind, args).await,
            None => unknown(args),
        });
    }
    Reply::Array(replies)
}

/// Whether a queued command's arguments will parse when it runs (decision commands: their
/// parameters and key; the others' errors cannot change anything). What is left to fail at
/// `EXEC` is the store.
fn validate(settings: &Settings, kind: Kind, args: &[Bytes]) -> Result<(), Reply> {
    let key_fits = |key: &[u8]| key.len() < weir_core::Key::MAX_LEN;
    match kind {
        Kind::Cell => {
            let (key, _, _) = cell::parse(args, settings.max_window)?;
            if !key_fits(key) {
                return Err(Reply::error(format!(
                    "Cell error: Store error: key is longer than {} bytes",
                    weir_core::Key::MAX_LEN - 1
                )));
            }
            Ok(())
        }
        Kind::Crab => {
            let (key, _) = crab::parse(args, settings.max_window)?;
            if !key_fits(key) {
                return Err(Reply::error(format!(
                    "ERR invalid key: longer than {} bytes",
                    weir_core::Key::MAX_LEN - 1
                )));
            }
            Ok(())
        }
        Kind::Check => check::parse(args)
            .map(|_| ())
            .map_err(|message| Reply::error(format!("ERR {message}"))),
        _ => Ok(()),
    }
}

/// Runs a command that passed the checks of [`run`] (or was queued and is run by `EXEC`).
async fn execute(shared: &Shared, session: &mut Session, kind: Kind, args: &[Bytes]) -> Reply {
    let engine = &shared.engine;
    let settings = &shared.settings;
    match kind {
        Kind::Cell => decision(shared, cell::throttle(engine, args, settings.max_window)).await,
        Kind::Crab => decision(shared, crab::throttle(engine, args, settings.max_window)).await,
        Kind::Check => decision(shared, check::check(engine, args)).await,
        Kind::Ping => session::ping(args),
        Kind::Echo => args.get(1).map_or(Reply::Null, |m| Reply::Bulk(m.clone())),
        Kind::Hello => hello(shared, session, args).await,
        Kind::Client => session::client(session, args),
        Kind::Command => introspect::command(args),
        Kind::Quit => {
            session.quit = true;
            Reply::OK
        }
        Kind::Select => session::select(args),
        Kind::Reset => session.reset(settings.password.is_some()),
        Kind::Auth => auth::auth(shared, session, args).await,
        Kind::Config => session::config(args),
        Kind::Info => info::info(shared, args),
        Kind::Unwatch => Reply::OK,
        // Handled by `run`; inside EXEC they are never queued.
        Kind::Multi | Kind::Exec | Kind::Discard | Kind::Watch => {
            Reply::error("ERR Command not allowed inside a transaction")
        }
    }
}

/// `HELLO`: its credentials checked when it has some, refused before `AUTH` when it has
/// none and a password is required.
async fn hello(shared: &Shared, session: &mut Session, args: &[Bytes]) -> Reply {
    let parsed = match session::parse_hello(session, args) {
        Ok(parsed) => parsed,
        Err(reply) => return reply,
    };
    match &parsed.credentials {
        Some((user, password)) => {
            if let Err(reply) = auth::verify(shared, session, Some(user), password).await {
                return reply;
            }
        }
        None if !session.authenticated => return auth::hello_noauth(),
        None => {}
    }
    session::hello(session, parsed)
}

/// A decision, bounded by the request timeout, timed and counted as `api="resp"`. It is
/// polled once before any timer exists: a decision the store makes in place (the memory
/// store's: nearly every pipelined command) is answered without building the timeout's
/// timer (a clock read and the runtime's handle, shared by every worker); one that must
/// wait is bounded as before.
async fn decision(shared: &Shared, decide: impl Future<Output = (Reply, Outcome)>) -> Reply {
    let metrics = shared.engine.metrics();
    let clock = shared.engine.limiter().clock();
    let start_ns = clock.now_ns();
    let timeout = shared.settings.request_timeout;
    let mut decide = pin!(decide);
    // A future polled again with another waker wakes that one: the no-op waker is dropped.
    let at_once = decide
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()));
    let answered = match at_once {
        Poll::Ready(answered) => Ok(answered),
        Poll::Pending => tokio::time::timeout(timeout, decide).await,
    };
    let (reply, outcome) = match answered {
        Ok(answered) => answered,
        Err(_) => (
            Reply::error(format!(
                "ERR no decision within {} ms (the store is slow or unreachable)",
                timeout.as_millis()
            )),
            Outcome::Error,
        ),
    };
    let took_ns = clock.now_ns().saturating_sub(start_ns);
    metrics.request_duration("resp", std::time::Duration::from_nanos(took_ns));
    metrics.request("resp", outcome.label());
    reply
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
    let name = args
        .first()
        .map(|n| String::from_utf8_lossy(n))
        .unwrap_or_default();
    let name: String = name.chars().take(128).collect();
    Reply::error(format!(
        "ERR unknown command '{name}', with args beginning with: {listed}"
    ))
}

/// The engine's judgement of a decision that failed, as the reply's outcome.
pub(crate) fn failed(error: &weir_engine::DecideError) -> Outcome {
    match error {
        weir_engine::DecideError::Unavailable(_) => Outcome::Error,
        _ => Outcome::Invalid,
    }
}
