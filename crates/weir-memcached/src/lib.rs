//! # weir-memcached
//!
//! Weir's memcached store: every algorithm and operation of `weir-core`, decided by the same
//! pure [`step::apply`](weir_core::step::apply) as the reference model, with the state kept
//! in memcached so that every instance of a service shares one limit. The conformance suite
//! of `weir-testkit` passes against a real memcached, every outcome equal to the model's.
//!
//! ```no_run
//! use std::time::Duration;
//! use weir_core::{Key, Limiter, Rule, SystemClock};
//! use weir_memcached::MemcachedStore;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemcachedStore::builder("memcached://127.0.0.1:11211")
//!     .timeout(Duration::from_millis(30))
//!     .build()?;
//! let limiter = Limiter::new(store, SystemClock::default());
//! let rule = Rule::sliding_window(100, Duration::from_secs(60), Duration::from_secs(5))?;
//! let decision = limiter.check(&Key::new("api:user-42")?, &rule, 1).await?;
//! if !decision.allowed {
//!     println!("retry in {:?}", decision.retry_after);
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Calls must run inside a tokio runtime with I/O and time enabled (`#[tokio::main]` or
//! `Builder::enable_all`): every round trip is a tokio TCP exchange under a tokio timeout.
//!
//! ## How each algorithm is stored
//!
//! - **Fixed window and sliding window counter** are counters: one decimal value per bucket
//!   of the precision (per window for the fixed window), named after the bucket's start and
//!   kept as long as it counts (TTL = until the bucket leaves the window). A check sends, in
//!   one write, a `gets` of the key's guard and of every bucket inside the window, and the
//!   `incr` of the current bucket; memcached runs them in order, so the decision is made on
//!   the sum just before the `incr`. Allowed: done, in one round trip. Denied: a `decr` takes
//!   the `incr` back (two). A fixed window's check also sends, before the `incr`, an `add`
//!   of a zero (a missing counter and a zero are the same), so a window's first hit is one
//!   round trip too; a sliding window's first hit of a bucket finds nothing to `incr` and
//!   `add`s it (two). The guard (manual block, lockout strikes) lives under the key's record name and
//!   is written only when it changes. Penalties `incr` too; rewards, resets and the rare
//!   reshaping of buckets use `cas`. A sliding window counter
//!   with more than [`MAX_BUCKETS`] buckets is stored as one record instead (below), so that
//!   a read never fetches more than 65 keys.
//! - **Every other algorithm** keeps its whole [`Record`](weir_core::Record) in one value
//!   (a compact versioned binary encoding): `gets`, the pure step, then `cas`: two round
//!   trips, or one when nothing changes (a peek, an inspect, a denial). A check sends with
//!   its `gets` the `add` of the record it would start on a key memcached does not hold, so
//!   a check on such a key is one round trip (if the key is there, the `add` changes
//!   nothing and the `cas` follows).
//!   A conflict is retried with jittered backoff, at most `max_retries` times.
//!   A record that stops being live is replaced by an empty tombstone with a `cas`, the
//!   text protocol having no compare-and-delete.
//!
//! ## Rule changes
//!
//! A key's block and lockout strikes always carry over (every layout keeps them under the
//! key's record name), and a record algorithm's state carries over exactly as the model's
//! does (`tests/rule_change.rs`). Counters carry over by bucket: a new limit, or a new
//! window over the same precision, reads the same buckets, exactly as the model; a new
//! precision (or a fixed window's new length) reads other buckets and starts the key fresh,
//! where the model would keep counting the old ones. And a key that goes from a counter to
//! another algorithm and back within one window finds its old counts again, where the model
//! starts it fresh (the other way round is exact: the first counter operation deletes the
//! other algorithm's state).
//!
//! ## Whose clock
//!
//! memcached has no clock a client can use, so this store always decides at the `now_ns`
//! it is given (the process clock; under `ManualClock` in tests). Instances must keep their
//! clocks in sync: a counter bucket is chosen by the caller's clock, so skew moves window
//! boundaries by the skew, and an instance running `d` behind does not yet see the bucket
//! that instances ahead are filling (up to what they admitted in the last `d` can be
//! admitted again); the record algorithms never move a state backwards, whatever the skew.
//! TTLs are relative, rounded up to whole seconds plus one, and only
//! reclaim memory: the record's own expiry decides, so memcached forgetting a key late
//! changes no decision. (TTLs above 30 days, which memcached would read as absolute times,
//! are sent as 0, no expiry.)
//!
//! ## What memcached cannot do atomically, and what it costs
//!
//! memcached gives atomicity per key and per command: `incr`, and `cas` against the value a
//! `gets` returned. Nothing spans two keys or a read and a write. So:
//!
//! - **Record algorithms are exact.** Every change is a `cas` on the value the decision was
//!   made on; a racing writer makes it fail and the decision is made again on the new value.
//!   Under contention this costs retries, never admissions: many tasks on one key at one
//!   instant admit exactly what the model admits sequentially. When `max_retries` conflicts
//!   come in a row the call fails with `StoreError::Unavailable` rather than guess.
//! - **Counters decide where the `incr` lands.** The `incr` returns the count it found, and
//!   the decision is made on that count (with the older buckets and the guard as the `gets`
//!   just before it saw them). If it denies, the `incr` is taken back with `decr`. So the
//!   current bucket never admits more than the limit: no over-admission at one instant,
//!   whatever the concurrency. The cost is **spurious denials**: between a denied check's
//!   `incr` and its `decr`, other checks see the count inflated by that check's cost and may
//!   be denied though they would fit. With unit costs this never happens (a check is denied
//!   only once the limit is reached by admitted units: the first check over the limit finds
//!   only admitted units before it); with mixed costs it can, only while a larger denied
//!   check is in flight. Measured at one frozen instant, 64 tasks on two store instances
//!   (`tests/concurrency.rs`): unit costs admit exactly the limit; costs 1 to 5 against a
//!   limit of 10 admit 6 to 10 units, never 11. The counters never lose a rollback: when the
//!   tasks finish, the count equals the units admitted.
//! - **Older buckets are read, not locked.** A sliding window sums the older buckets as read
//!   before the `incr`; only rewards, resets and bucket merges change those (with `cas`), so
//!   a check racing one of them may decide on the counts from just before it (a merge moves
//!   units into the current bucket, where they may then be counted twice: a denial, never an
//!   admission).
//! - **Several writes for one operation are not one transaction.** A reset, a reward spread
//!   over several buckets, or a bucket merge writes the newest bucket first, then the older
//!   ones, then the guard; a racing decision can see it half done. Each write is a `cas`, so
//!   a conflict is detected: the writes already made are taken back (if still ours) and the
//!   operation starts again on what it then reads.
//! - **[`check_all`](weir_core::Store::check_all)** reads every limit in one `gets`, decides
//!   all on copies exactly as the model does, and writes in name order; a conflict on any
//!   write takes back the writes already made (`decr`, or the old value if still ours) and
//!   starts again. Each write is atomic; the set is not: a concurrent decision can see some
//!   limits charged before the others are (it may then be denied spuriously), and a rollback
//!   that finds a value already changed by someone else leaves it (the charge stays, which
//!   only denies more).
//! - **Eviction.** memcached may evict any key under memory pressure, and an evicted key is
//!   a fresh budget. Give it the memory for every live key (a record is 10 to 100 bytes
//!   plus memcached's ~50 bytes of overhead; a counter bucket about the same).
//! - **Held records.** A record kept past its expiry (memcached forgets it some time after)
//!   and a key never seen are equivalent for every decision but one: a token bucket with
//!   `initial < capacity`, whose fresh state is live, so the model rewrites an expired record
//!   on any operation (a fresh bucket starting then) but creates none for a key it never
//!   held. This store follows the model while memcached still has the expired value (up to
//!   two seconds past the record's expiry, by the TTL's rounding), and treats the key as
//!   never held once memcached has dropped it, as a store with exact TTLs must.
//!
//! ## Several servers
//!
//! `MemcachedStore::builder("memcache://h1:11211,h2:11211")` (the list envoyproxy/ratelimit's
//! `MEMCACHE_HOST_PORT` takes) or [`MemcachedStoreBuilder::servers`] spreads the keys over
//! several servers, each with its own pool of `pool_size` connections. Each key lives on
//! one server with all its names (record, guard, buckets), so every operation on one key
//! is that server's alone and keeps the atomicity above, and every pipelined round trip
//! stays one round trip. The server is chosen by a consistent-hash ring, ketama-style: 160
//! points per server at SHA-256(`"{host:port}-{i}"`), a key at SHA-256 of its names' body.
//! Every instance sharing limits must list the same servers by the same `host:port` names
//! (the order and the ASCII case do not matter).
//!
//! - **Not gomemcache's mapping.** ratelimit, through gomemcache's `ServerList`, sends each
//!   memcached name to `crc32(name) % N`. Matching that buys nothing and costs much: Weir's
//!   names (`weir:r:=…`) are never ratelimit's (`…_{key}_{value}_{window}`), so the two
//!   never share a key whatever the mapping; a key's names (a record and its buckets) would
//!   land on different servers, which breaks the one-round-trip, one-server decision; and
//!   a change of the list would move about `(N-1)/N` of the keys, where the ring moves
//!   about `1/N`. (Recent gomemcache versions also take a failing server out of the modulo,
//!   moving its keys elsewhere mid-window: what the next point forbids.)
//! - **A dead server is never routed around.** Its keys fail (`StoreError::Unavailable`, or
//!   `StoreError::Timeout` if it does not answer, within the timeout) while the other
//!   servers' keys are decided as before; each rule's failure policy applies above the
//!   store (`weir-resilience`'s `FailoverStore`). Moving its keys to another server would
//!   start them afresh there mid-window, silently admitting up to one more limit per key.
//!   [`ping`](weir_core::Store::ping) succeeds only when every server answers. Each
//!   server is one [part](weir_core::Store::parts) of the store
//!   ([`part_of`](weir_core::Store::part_of) a key is its server on the ring,
//!   [`ping_part`](weir_core::Store::ping_part) asks that server alone), so the
//!   `FailoverStore` keeps one circuit per server: a dead server's keys follow their
//!   rule's failure policy while the other servers' keys keep deciding on the store, and
//!   each server's keys return to it as soon as it answers again.
//! - **Changing the list** moves only the keys the ring places elsewhere (about `1/(N+1)`
//!   of them when one server is added, all to it; the removed server's when one is
//!   removed). A moved key starts afresh on its new server, as on a restarted memcached:
//!   up to one more limit admitted in the window in force (a key that moves back finds its
//!   older state, the same bound). While instances roll over to a new list, those with the
//!   old one and those with the new decide a moved key on different servers, each up to the
//!   limit. Change the list when a window's excess is acceptable, or let the rules' windows
//!   pass with the old list drained.
//! - **[`check_all`](weir_core::Store::check_all)** reads the names of each server in one
//!   `gets`, the servers concurrently, and writes one by one in name order as with one
//!   server; its guarantees (above) are the same whether the keys share a server or not.
//!   A server that fails on the read fails the call before anything is written; one that
//!   fails between writes leaves the writes already made on the others (a charge without
//!   an admission, which only denies more), as in *Failures* below.
//!
//! ## Failures
//!
//! Every round trip runs under the configured timeout (default 500 ms, connecting included) and
//! fails with `StoreError::Timeout`, whichever server it goes to; a refused or broken connection is
//! `StoreError::Unavailable` with the reason (for every call in flight on it: calls share
//! connections, pipelined). The pool replaces a broken connection, and one on which a call timed
//! out, when it is next picked. A value this version cannot read is `StoreError::Corrupt`. No call
//! panics or waits without bound (at most `max_retries + 1` attempts of a few round trips each,
//! with waits of at most 2 ms between them). A call that fails between two of its writes (only
//! multi-write operations and `check_all` have several) returns the error without taking back the
//! writes already made: such an operation may be partly applied, as a caller that retries it must
//! know; a single check writes once. Failure policies (fail open, fail closed, local fallback) are
//! applied above the store, in `weir-resilience`.

mod addresses;
mod apply;
mod backoff;
mod builder;
mod charge;
mod check_all;
mod client;
mod codec;
mod context;
mod decide;
mod error;
mod exec;
#[doc(hidden)]
pub mod fuzzing;
mod keys;
mod layout;
mod plan;
mod ring;
mod snapshot;
mod store;

pub use builder::MemcachedStoreBuilder;
pub use error::ConfigError;
pub use layout::MAX_BUCKETS;
pub use store::MemcachedStore;

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
