//! # weir-resp
//!
//! A Redis-protocol (RESP2 and RESP3) front end for Weir: any language's Redis client
//! becomes a Weir client, as with redis-cell and throttlecrab, with no SDK to write. It
//! decides on a [`weir_engine::Engine`], the one `weir serve`'s HTTP and gRPC APIs use:
//! the same store (memory, Redis, memcached, behind the same guards), the same rules in
//! force and the same metrics.
//!
//! | command | answers |
//! | --- | --- |
//! | `CL.THROTTLE key max_burst count period [quantity]` | redis-cell's `[limited, limit, remaining, retry_after, reset_after]`, its rounding, edge cases and error messages |
//! | `THROTTLE key max_burst count period [quantity]` | throttlecrab's `[allowed, limit, remaining, reset_after, retry_after]` and errors |
//! | `WEIR.CHECK domain key value [key value …] [HITS n]` | the rule files' verdict for one descriptor, `/v1/check`'s fields as a map |
//! | `MULTI`, `EXEC`, `DISCARD` | as Redis: queued, run in order at `EXEC`; one refused command and `EXEC` runs nothing (`-EXECABORT`) |
//! | `PING`, `ECHO`, `HELLO 2/3 [AUTH …]`, `AUTH`, `CLIENT …`, `COMMAND [DOCS …]`, `INFO`, `SELECT 0`, `RESET`, `CONFIG GET`, `QUIT` | as Redis does, for what clients send on their own (ioredis's ready check, redis-py's `info()`) |
//!
//! Anything else is Redis's `ERR unknown command '…', with args beginning with: …`; a wrong
//! argument count is `ERR wrong number of arguments for '…' command`; `WATCH` is refused
//! (there are no values to watch). redis-py, ioredis, node-redis, the `redis` crate,
//! redis-cli and redis-benchmark work in their default configurations
//! (`scripts/resp-clients`, `tests/clients.rs`).
//!
//! ## Who may send commands
//!
//! Without [`Settings::password`] and [`Settings::tls`], **anyone who reaches the port**:
//! they can spend and lock any key, and read any key's usage. Keep it on loopback or a
//! private network, or set a password (`AUTH`; every command but `AUTH`, `HELLO`, `PING`
//! and `QUIT` is `-NOAUTH Authentication required.` until then; compared in constant time,
//! a wrong one answered after 100 ms, one at a time server-wide) and / or TLS (mutual TLS
//! with a client CA; `weir_listen::tls_acceptor`, the other listeners' set-up). One
//! `CL.THROTTLE` / `THROTTLE` may hold a key at most [`Settings::max_window`] (1 day:
//! `(max_burst + 1) × period / count` beyond it is an error), so a caller cannot set a
//! decade-long lockout on someone else's key unless the operator allows it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use weir_engine::{Engine, EngineSettings};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:6380").await?;
//! let engine = Engine::open(EngineSettings::default()).await?; // example rules, memory
//! weir_resp::serve(listener, engine, weir_resp::Settings::default(), async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await;
//! # Ok(()) }
//! ```
//!
//! ```text
//! $ redis-cli -p 6380 CL.THROTTLE user123 15 30 60
//! 1) (integer) 0
//! 2) (integer) 16
//! 3) (integer) 15
//! 4) (integer) -1
//! 5) (integer) 2
//! ```
//!
//! ## Limits
//!
//! Bounded whatever clients send ([`Settings`]; `weir serve` passes its own
//! `--max-connections`, body size, `--header-read-timeout` and `--request-timeout`): 4096
//! connections, 1024 arguments per command, 16 KiB per argument and 64 KiB per command
//! (checked from the headers, before anything is buffered; a violation is answered
//! `-ERR Protocol error: …` and the connection closed, as Redis does), a command sent whole
//! within 10 s of its first byte (a deadline: trickling does not move it), idle
//! connections closed after 5 minutes, each decision bounded by 5 seconds, 1 MiB queued
//! in a transaction. Pipelined commands are answered in order; a client that does not
//! read its replies stops being read, and is closed once they have waited 10 s. Shutdown
//! waits at most 30 s for connections. Keys are at most 511 bytes.
//!
//! ## Differences from redis-cell and throttlecrab
//!
//! Both are ported from their sources, and their test cases run here (`tests/`). Where
//! their arithmetic breaks, Weir answers an error in their own form instead:
//! - redis-cell: a negative rate (`count` and `period` of opposite signs), a negative
//!   quantity (redis-cell would move the key's time back), and `max_burst`, quantity or
//!   period beyond what its `i64` nanoseconds hold (292 years; redis-cell wraps around) or
//!   a rate slower than one per 10 years (Weir's `MAX_SPAN`). Every other input, the
//!   negative `max_burst` that makes the limit zero or negative and the rates faster than
//!   one per microsecond included, answers what redis-cell answers.
//! - throttlecrab: `max_burst` above 2³² (throttlecrab truncates it) and rates slower than
//!   one per 10 years. And one deliberate change: throttlecrab lets a key idle for part of
//!   its lifetime start from a time in the past and pass more than `max_burst` at once;
//!   Weir's GCRA never does.
//! - Records are Weir's: a key's TAT lives in the limiter's store under the rule
//!   `cl.throttle` (or `throttle`), keyed by the client's key, so the two commands never
//!   share a key's budget, and changing a key's parameters re-reads its TAT, as redis-cell
//!   does.
//!
//! `WEIR.CHECK` is the engine's `decide` (matching, `replaces`, unlimited and zero-limit
//! rules, hits above capacity, shadow and roll-out, a full store's failure policy), so it
//! is counted in the same metrics and top-denied keys as `/v1/check`. `CL.THROTTLE` and
//! `THROTTLE` decide through `Engine::check_rule`: the same store call, judgement of a
//! failed store and top-denied keys, counted under `domain="resp"` and the command's rule
//! name. Every decision counts in `weir_requests_total{api="resp"}` and
//! `weir_request_duration_seconds{api="resp"}`.
//!
//! One difference from Redis in transactions: Redis checks a queued command's arguments
//! only at `EXEC` (a bad `CL.THROTTLE` fails alone, the others run); here a decision
//! command whose arguments would fail is refused when queued and aborts the whole batch.

mod commands;
mod connection;
mod protocol;
mod server;
mod settings;

pub use server::serve;
pub use settings::Settings;
/// The TLS acceptor behind [`Settings::tls`] (build it with `weir_listen::tls_acceptor`).
pub use tokio_rustls::TlsAcceptor;

// The README's examples are compiled as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
