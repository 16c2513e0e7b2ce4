//! Commands: `table.rs` lists what the front end answers, `dispatch.rs` runs one command
//! (Redis's arity and unknown-command errors, the request timeout), `args.rs` is the leaf
//! of argument helpers every handler uses. One file per group:
//! `cell.rs` (`CL.THROTTLE`, redis-cell), `crab.rs` (`THROTTLE`, throttlecrab),
//! `check.rs` (`WEIR.CHECK`, the rule files), `session.rs` (`PING`, `HELLO`, `CLIENT`, …),
//! `introspect.rs` (`COMMAND`, `COMMAND DOCS`), `info.rs` (`INFO` and the counters it
//! shows), `auth.rs` (`AUTH`, the password), `transaction.rs` (`MULTI` / `EXEC` /
//! `DISCARD`). Handlers build a `Reply`; they never see bytes on the wire.

mod args;
mod auth;
mod cell;
mod check;
mod crab;
mod dispatch;
mod info;
mod introspect;
mod session;
mod table;
mod transaction;

pub(crate) use dispatch::{run, Shared};
pub(crate) use session::Session;
