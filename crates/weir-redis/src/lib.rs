//! # weir-redis
//!
//! Weir's store in Redis or Valkey (6.2+, 7), as a single node, behind Sentinel, or as a
//! Cluster: the limit holds across every instance of a service that shares it. Each
//! decision is one atomic Lua script call, mirroring the pure step of `weir-core`, and
//! `weir-testkit`'s conformance suite proves it answers exactly as the model does.
//!
//! The path of one decision: [`Limiter`](weir_core::Limiter) (or any caller) calls
//! [`Store::apply`](weir_core::Store::apply) on a [`RedisStore`]. The operation is validated
//! on this side by the pure step itself, encoded into `ARGV`, and sent as one `FCALL` of
//! Weir's Redis function library (`EVALSHA` of the algorithm's script on a server without
//! functions), or coalesced with other calls into one batch; the script reads the key's
//! record (one string), runs the step, writes it back with a TTL if it changed, and
//! replies with the decision.
//!
//! ```no_run
//! use std::time::Duration;
//! use weir_core::{Key, Limiter, Rule, SystemClock};
//! use weir_redis::RedisStore;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let store = RedisStore::builder("redis://127.0.0.1:6379")
//!     .timeout(Duration::from_millis(30))
//!     .build()?;
//! let limiter = Limiter::new(store, SystemClock::new());
//! let rule = Rule::per_second(10)?;
//! let decision = limiter.check(&Key::new("api:user-42")?, &rule, 1).await?;
//! if !decision.allowed {
//!     println!("retry in {:?}", decision.retry_after);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Needs a Tokio runtime with time enabled (`enable_all`); outside a runtime every call
//! fails with [`StoreError::Unavailable`](weir_core::StoreError::Unavailable).
//!
//! ## Deployments
//!
//! | URL | Deployment |
//! |---|---|
//! | `redis://[user:password@]host:port[/db]` | one node |
//! | `rediss://[user:password@]host:port[/db][?ca=PATH][&cert=PATH&key=PATH]` | one node over TLS: the system's roots, or the CA in `ca`; `cert` and `key` for mutual TLS |
//! | `unix:///path/to/redis.sock[?db=N][&user=U][&pass=P]` (or `redis+unix://`) | one node on a Unix socket |
//! | `redis+cluster://[user:password@]host:port,host:port,...` | a Cluster, from any seed nodes |
//! | `redis+sentinel://[user:password@]host:port,.../master_name[/db]` | the master Sentinel names; credentials are the data nodes' |
//!
//! **Valkey** speaks the same protocol and has the same functions; `tests/valkey.rs` runs
//! the conformance suite against a `valkey-server` when one is on `PATH`. Debian 12 has no
//! Valkey package, so on such a machine that test prints a `SKIPPED` line (visible in
//! `cargo test`'s output) and checks nothing: the suite has not been run against Valkey
//! there.
//!
//! TLS is redis-rs's over rustls with the ring provider (no system OpenSSL); it is
//! installed as rustls's process-wide default the first time a `rediss://` store is built,
//! unless the application installed one. The CA and client files can also be given by
//! [`RedisStoreBuilder::tls_ca`] and [`RedisStoreBuilder::tls_client_cert`] (one place
//! each); they are read, and a CA file without a certificate refused, when the store is
//! built. The server's name is verified against the URL's host (an IP address works when
//! the certificate names it); there is no `#insecure`. TLS to a Cluster or behind Sentinel
//! is not supported yet. The query string (paths, a socket's `pass`) never appears in
//! messages. Behind Sentinel, a failover is followed on the next
//! reconnect (a broken connection, or `READONLY` from a demoted master); replication is
//! asynchronous, so a failover may lose the last decisions written to the old master (the
//! new one admits them again), as with any Redis failover.
//!
//! ## Design
//!
//! **Each algorithm once in Lua.** `lua/` holds `base.lua` (constants, exact integer
//! primitives, epoch alignment without long multiplication, the rule's one `ARGV` field),
//! a shared prelude (the rest of the integer helpers, the clock, exact epoch alignment),
//! `record.lua` (the record's string), `step.lua` (expiry, block, lockout, dispatch,
//! expiry again: `step.rs` line for line), one file per algorithm (each mirrors its Rust
//! file and says which), and the entry points: `single_fast.lua` and `single.lua` (one
//! operation), `multi.lua` (`check_all`), `batch.lua` (a batch). `scripts.rs` assembles
//! them at load time into a Redis 7 **function library** (`FUNCTION LOAD`, then `FCALL`
//! of its three entry points; named after a hash of its text, so versions never replace
//! each other's), and into `EVALSHA` scripts for a server without functions (Redis 6.2:
//! the first "unknown command" switches the store to them; so does `NOPERM` for a user
//! whose ACL allows scripts but not functions): one per algorithm, plus the
//! multi and batch scripts, which carry every algorithm. A node that lacks the library (a
//! new or restarted one, or after `FUNCTION FLUSH`) answers "function not found", and the
//! store loads it and calls again; likewise a script on `NOSCRIPT`. User input never
//! reaches the script text: keys go in `KEYS`, every value in `ARGV`. A rule is one
//! `ARGV` field (`gc 10 100000000 1000000000`), which the library parses once per distinct
//! text and keeps (a bounded cache of constants, nothing a replica needs).
//!
//! **Warm-up** (`Rule::with_warmup`) is `warmup.lua`, around GCRA's and the token bucket's
//! general modules, under tags of its own (`gw`, `tw`: a warm-up rule's record is not a
//! plain one, as in `weir-core`); the rule's field ends with ` ~<period> <cold factor>
//! <ramp>`. It never takes the fast path.
//!
//! **The fast path.** `fast.lua` answers the common call, a check under GCRA, the token
//! bucket, the fixed window or the sliding log / window on a key with no block or lockout
//! strikes, straight-line; it hands anything else (with the record it read, having
//! written nothing) to the general path. It holds no algorithm: the first part of each of
//! those four algorithm files (up to its `-- @general` line) is the step over plain
//! numbers, and both the fast path (through the file's small adapter) and the general
//! module after it call that step. So an algorithm exists twice in all, once in Rust and
//! once in Lua. Under `EVALSHA`, which runs a script's whole chunk on every call, the fast
//! path and the shared steps come before the general path's definitions, so a call they
//! answer builds none of those. The conformance suite runs every entry point with the fast
//! path, without it, and in the `EVALSHA` form (`src/paths.rs`).
//!
//! **Time encoding.** Time is integer nanoseconds since the Unix epoch (about 1.7·10^18),
//! but Lua numbers are doubles, exact only up to 2^53. So `now` travels as two integers
//! (whole seconds, nanoseconds within the second), and each key's record stores a *base*
//! (whole seconds) with every instant as a signed nanosecond offset from it, exact while
//! below 2^53 (104 days). When `now` drifts more than 2^50 ns (13 days) from the base, the
//! script *rebases*: base becomes now's second and every stored instant moves by the same
//! amount, computed exactly (`seconds × 10^9` is exact in a double). Products that could
//! pass 2^53 (the weighted window's `previous × elapsed / window`, epoch alignment
//! `now mod window`) use exact long multiplication. To keep every intermediate exact:
//!
//! - every span a rule or an operation expresses (window, `capacity × interval`, GCRA
//!   tolerance, `max_depth × interval`, warm-up period, lockout, forgiveness, block
//!   duration, lease TTL) and every limit must be at most [`MAX_SPAN`] (2^51 ns, about 26
//!   days, and 2^51 units). Larger ones are refused before any round trip with
//!   [`CheckError::Invalid`](weir_core::CheckError::Invalid) naming the parameter. (So a
//!   monthly window needs another store; `weir_core::MAX_SPAN` allows ten years.)
//! - an operation that would push a key's state more than 2^52 ns past now (penalties
//!   piled up) or a count past 2^52 is refused with `CheckError::Invalid` and changes
//!   nothing. The model would accept it; this is the one place the store may differ.
//!
//! Durations come back relative (`reset_after`, `retry_after`, `delay` in ns) and are
//! exact to the nanosecond.
//!
//! **Key layout.** A key without a hash tag of its own is stored at `<prefix>:{<key>}`; a
//! key with one (`api:1s:{user-7}`) at `<prefix>::<key>`, so its own tag picks the Cluster
//! slot (the prefix, default `weir`, may not contain braces). Each is one string, read with
//! `GET` and written with one `SET`: `a` the algorithm tag, `b` base seconds, `x` expiry
//! offset, then `;gb gs ge` (the block and lockout strikes) when there is a guard, then
//! each of the algorithm's fields after a space (documented in its Lua file), numbers in
//! decimal:
//!
//! ```text
//! gc 1700000000 223456789 223456789                        GCRA: a b x t
//! gw 1700000000 3223456789 223456789 100000000             GCRA with warm-up: a b x t w
//! fw 1700000000 70123456789;10123456789 1 70123456789 0 3  a fixed window, blocked:
//!                                                          a b x;gb gs ge s c
//! sl 1700000000 11123456789 2 <32 bytes>                   a sliding log: a b x n e
//! ```
//!
//! The variable-size field is last, raw bytes to the end: sliding-window buckets packed as
//! 16-byte pairs of doubles (decoded only where a call touches them), leases in
//! MessagePack. A sliding log still copies its whole record on each write: about 1 ms a
//! call at 10 000 entries on a small machine, so prefer the sliding window counter for
//! large limits. A record from another version, or a key that is not a string, is
//! [`StoreError::Corrupt`](weir_core::StoreError::Corrupt), never overwritten.
//!
//! **Upgrading from a version that kept hashes** (before the string layout): the old
//! records are hashes, which this version reports as corrupt (`WRONGTYPE`), and an old
//! instance reads the new strings as corrupt too. Old and new versions must not share a
//! keyspace: give the new version a new [`prefix`](RedisStoreBuilder::prefix) (or another
//! database). The old keys expire by themselves when their TTLs end; keys start fresh under
//! the new prefix, so each limit's window or bucket starts over once.
//!
//! **TTL.** A record is kept exactly while it is *live* (`weir-core`'s
//! `Record::is_live`): its TTL (`SET … PX`, rounded up to the millisecond) ends when its
//! state is equivalent to a fresh one, so idle keys vanish, and a step that leaves it not
//! live deletes it (`DEL`). An operation that adds no usage never creates one. A key still
//! there past its freshness (the grace below, or the millisecond rounding) is read as
//! fresh, as the step reads any expired record. A record is written only when it changed,
//! and its TTL set only when the expiry moves (`SET … KEEPTTL` otherwise), so a denial or a
//! peek writes nothing: a plain check is `TIME`, `GET` and at most one `SET`.
//!
//! **Whose clock** ([`TimeSource`]). By default the store's: the script reads `TIME`, the
//! `now_ns` a caller passes is ignored, and skew between application servers does not
//! matter. With [`TimeSource::Process`] the caller's `now_ns` goes in `ARGV`; this is how
//! the tests drive the store with a manual clock. Either way, a `now` older than a key's
//! state never moves it backwards (the algorithms guarantee it, and the scripts mirror
//! them). Under the process clock, keys are kept a grace period past their freshness
//! ([`RedisStoreBuilder::ttl_grace`], default 1 s), so that an instance whose clock lags
//! does not find a key gone early; keeping a key longer never changes a decision.
//!
//! **Several limits at once** ([`Store::check_all`](weir_core::Store::check_all)) are one
//! call of `multi.lua`: every limit decided on a copy, written back only if all allow
//! (denials write their lockout). On a Cluster, one script's keys must share a hash slot,
//! so the keys of one `check_all` must share a hash tag (`api:1s:{user-7}`,
//! `api:1h:{user-7}`); otherwise the call is refused with `CheckError::Invalid` (param
//! `keys`) before any round trip. Routing per slot would lose all-or-nothing.
//!
//! **Failures.** Every call, connecting included, is bounded by the timeout (default
//! [`RedisStore::DEFAULT_TIMEOUT`]) and fails with
//! [`StoreError::Timeout`](weir_core::StoreError::Timeout) past it; a refused, reset or
//! failing connection is [`StoreError::Unavailable`](weir_core::StoreError::Unavailable)
//! with a message naming the URL, password replaced by `***`. The connection is made on
//! first use and made again after it breaks (or after three timeouts in a row), so calls
//! work again as soon as Redis does. A Cluster connection is made again after three
//! failures, re-reading the slot map: redis-rs re-reads it only on `MOVED`, which a dead
//! primary never sends, so a failover would otherwise go unnoticed. Nothing here panics
//! or waits unbounded.
//!
//! **Health per Cluster primary.** A Cluster store has one part per primary
//! ([`Store::parts`](weir_core::Store::parts), up to 64; `shards.rs`), so a failure guard
//! (`weir-resilience`'s `FailoverStore`) keeps one circuit per primary: a dead primary
//! sends only the keys whose slots it serves to their rule's failure policy. The slot map
//! is read with `CLUSTER SLOTS` from any node that answers, when a Cluster connection is
//! made and before each PING of a part; a part keeps its number while its slots move to a
//! promoted replica or a restarted primary, and a part that answers again after failing
//! to renews the Cluster connection so its keys reach it at once. Redis itself refuses
//! every key while any slot is unserved unless `cluster-require-full-coverage` is `no`;
//! then only the dead primary's keys fail.
//!
//! **Batching** ([`RedisStoreBuilder::batch`], off by default). Concurrent decisions are
//! coalesced into one call of `batch.lua` (up to N decisions, gathered for up to T
//! after the first, or whatever queued while two earlier batches were in flight), which
//! runs each exactly as it would run alone. With no wait (T zero), a decision that finds
//! nothing in flight or queued goes at once as an unbatched call, so a lone caller pays no
//! hop to the collector. The per-call cost of Lua and the round trip is paid once per
//! batch, and so are `TIME` and the reads: one `MGET` of every key. `MGET` reads a key of
//! another type as absent, so a record the batch starts on a key it saw absent is written
//! with `SET … NX`, and a key that turns out to be taken (or a peek at one that exists) is
//! read again by `GET`, which reports it corrupt. On a Cluster, batches are formed per hash
//! slot.

mod batch;
mod builder;
mod call;
mod connection;
mod encode;
mod error;
mod exec;
mod keys;
#[cfg(test)]
mod paths;
mod redact;
mod reply;
mod scripts;
mod shards;
mod store;
mod tls;
mod url;

pub use builder::RedisStoreBuilder;
pub use encode::MAX_SPAN;
pub use error::BuildError;
pub use store::RedisStore;
pub use store::TimeSource;

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
