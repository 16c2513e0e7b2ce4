//! # weir-core
//!
//! The pure heart of Weir: every rate-limiting algorithm as a step over a small state, the
//! clock, the [`Limiter`], and the embedded [`MemoryStore`]. No I/O and no runtime (tokio's
//! timer is used only by [`SystemClock::sleep_until`] inside a tokio runtime, behind the
//! default `tokio` feature).
//!
//! The path of one decision: [`Limiter::check`] reads `now` from a [`Clock`], and asks a
//! [`Store`] to run [`step::apply`] atomically on the key's [`Record`]; the step dispatches
//! to the rule's [`algorithm`] and returns a [`Decision`].
//!
//! ## Quick start
//!
//! ```
//! use std::time::Duration;
//! use weir_core::{Key, Limiter, Rule};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let limiter = Limiter::default(); // memory store, system clock
//! let rule = Rule::sliding_log(100, Duration::from_secs(60))?;
//! let decision = limiter.check(&Key::new("user:42")?, &rule, 1).await?;
//! assert!(decision.allowed);
//! assert_eq!(decision.remaining, 99);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! ## Time
//!
//! [`SystemClock`] reads the CPU's time stamp counter (about 10 ns, as governor's clock),
//! held within 2 ms ahead of, and a few microseconds behind, a monotonic clock anchored to
//! the wall clock when the process first reads it; it never goes backwards. Tests use
//! [`ManualClock`] and never sleep.
//!
//! ## Without an async runtime
//!
//! Over the memory store (any [`SyncStore`]), every verb has a synchronous twin,
//! [`Limiter::check_now`], [`Limiter::peek_now`], … , and [`Limiter::wait_blocking`] sleeps
//! the thread until the request may go:
//!
//! ```
//! use weir_core::{Key, Limiter, Rule};
//!
//! let limiter = Limiter::default();
//! let rule = Rule::per_second(10)?;
//! let key = Key::new("user:42")?;
//! assert!(limiter.check_now(&key, &rule, 1)?.allowed);
//! assert_eq!(limiter.peek_now(&key, &rule)?.remaining, 9);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! One budget for the whole program, with no key (a paid API's quota, an alert), is a
//! [`DirectLimiter`]: one atomic word decided by one compare-and-swap, governor's direct
//! limiter with the same decisions under GCRA:
//!
//! ```
//! use weir_core::{DirectLimiter, Rule};
//!
//! let alerts = DirectLimiter::new(Rule::per_second(5)?)?;
//! assert!(alerts.check_now()?.allowed);
//! assert_eq!(alerts.peek_now()?.remaining, 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! One rule over many keys of any `Hash + Eq` type (a user id, an `IpAddr`, a `String`
//! checked as `&str`, a tuple) is a [`KeyedLimiter`]: governor's keyed limiter's
//! counterpart, synchronous, over its own bounded memory store; a key of 8 bytes or fewer
//! (`u64`, `IpAddr::V4`, …) is one lock-free step under GCRA, a token bucket or a fixed
//! window. `check_now` has the same shape on both limiters (`Result<Decision, CheckError>`):
//!
//! ```
//! use weir_core::{KeyedLimiter, Rule};
//!
//! let per_user: KeyedLimiter<u64> = KeyedLimiter::new(Rule::per_second(5)?)?;
//! assert!(per_user.check_now(&42)?.allowed);
//! assert_eq!(per_user.peek_now(&42)?.remaining, 4);
//! assert_eq!(per_user.peek_now(&7)?.remaining, 5);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The async [`Limiter::wait`] runs under any executor: inside a tokio runtime it sleeps on
//! tokio's timer, under any other (`futures::executor::block_on`, smol, …) a helper thread,
//! `weir-timer`, wakes it. It never spins.
//!
//! ## Recipes
//!
//! **Login lockout**: three failed passwords for one account within a minute lock it for
//! five minutes, doubling for repeat offenders up to an hour; a success clears it. A login
//! handler asks `inspect` first (is the account locked out?), never `peek`: once the log is
//! full, a peek refuses, the failure is never counted, and the lockout never engages.
//!
//! ```
//! use std::time::Duration;
//! use weir_core::{CheckError, Key, Limiter, Lockout, ManualClock, MemoryStore, Rule, Store, Clock};
//!
//! /// A login handler's rate-limit part: `Err(retry_after)` when the account is locked out.
//! async fn login<S: Store, C: Clock>(
//!     limiter: &Limiter<S, C>,
//!     rule: &Rule,
//!     account: &Key,
//!     password_ok: bool,
//! ) -> Result<Result<(), Duration>, CheckError> {
//!     // 1. Locked out? Refuse before looking at the password.
//!     let usage = limiter.inspect(account, rule).await?;
//!     if !usage.blocked_for.is_zero() {
//!         return Ok(Err(usage.blocked_for));
//!     }
//!     // 2. A correct password clears the count and the strikes.
//!     if password_ok {
//!         limiter.reset(account, rule).await?;
//!         return Ok(Ok(()));
//!     }
//!     // 3. A wrong one is counted; the failure past the limit engages the lockout.
//!     let failure = limiter.check(account, rule, 1).await?;
//!     Ok(if failure.allowed { Ok(()) } else { Err(failure.retry_after) })
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let clock = ManualClock::new(1_700_000_000_000_000_000);
//! let limiter = Limiter::new(MemoryStore::default(), clock.clone());
//! let lockout = Lockout::new(Duration::from_secs(300))?.escalating(Duration::from_secs(3600))?;
//! let failed_logins = Rule::sliding_log(3, Duration::from_secs(60))?.with_lockout(lockout);
//! let account = Key::new("login-failures:alice@example.com")?;
//!
//! // Three wrong passwords are counted; the fourth locks the account for five minutes.
//! for _ in 0..3 {
//!     assert_eq!(login(&limiter, &failed_logins, &account, false).await?, Ok(()));
//! }
//! let five_minutes = Duration::from_secs(300);
//! assert_eq!(login(&limiter, &failed_logins, &account, false).await?, Err(five_minutes));
//! // Locked out: even the right password is refused until the lockout ends.
//! clock.advance(Duration::from_secs(60));
//! assert_eq!(login(&limiter, &failed_logins, &account, true).await?, Err(Duration::from_secs(240)));
//!
//! // A repeat offender's next lockout is twice as long.
//! clock.advance(Duration::from_secs(240));
//! for _ in 0..3 {
//!     login(&limiter, &failed_logins, &account, false).await?;
//! }
//! assert_eq!(login(&limiter, &failed_logins, &account, false).await?, Err(2 * five_minutes));
//!
//! // After it, a correct password clears the count and the strikes.
//! clock.advance(2 * five_minutes);
//! assert_eq!(login(&limiter, &failed_logins, &account, true).await?, Ok(()));
//! assert_eq!(limiter.inspect(&account, &failed_logins).await?.used, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! **An API quota with two limits**: 10 per second and 1000 per hour for one user, checked
//! together, all-or-nothing.
//!
//! ```
//! use std::time::Duration;
//! use weir_core::{Key, Limiter, ManualClock, MemoryStore, Rule};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let clock = ManualClock::new(1_700_000_000_000_000_000);
//! let limiter = Limiter::new(MemoryStore::default(), clock.clone());
//! let limits = [
//!     (Key::new("api:1s:user-7")?, Rule::per_second(10)?),
//!     (Key::new("api:1h:user-7")?, Rule::sliding_window(1000, Duration::from_secs(3600), Duration::from_secs(60))?),
//! ];
//! for _ in 0..10 {
//!     assert!(limiter.check_all(&limits, 1).await?.allowed);
//! }
//! let denied = limiter.check_all(&limits, 1).await?;
//! assert!(!denied.allowed);
//! let headers = denied.most_restrictive().unwrap();
//! assert_eq!(headers.retry_after, Duration::from_millis(100));
//! // The hourly limit was not charged for the denied request.
//! assert_eq!(limiter.inspect(&limits[1].0, &limits[1].1).await?.used, 10);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! **A semaphore and a timed lock**: at most 3 concurrent exports per tenant; `N = 1` is a
//! lock whose lease expires if its holder crashes.
//!
//! ```
//! use std::time::Duration;
//! use weir_core::{Key, Limiter, ManualClock, MemoryStore, Rule};
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let clock = ManualClock::new(1_700_000_000_000_000_000);
//! let limiter = Limiter::new(MemoryStore::default(), clock.clone());
//! let exports = Rule::concurrency(3)?;
//! let tenant = Key::new("exports:tenant-9")?;
//! let ttl = Duration::from_secs(60);
//! for worker in ["a", "b", "c"] {
//!     assert!(limiter.acquire(&tenant, &exports, worker, ttl).await?.allowed);
//! }
//! assert!(!limiter.acquire(&tenant, &exports, "d", ttl).await?.allowed);
//! limiter.release(&tenant, &exports, "a").await?;
//! assert!(limiter.acquire(&tenant, &exports, "d", ttl).await?.allowed);
//!
//! let lock = Rule::concurrency(1)?;
//! let job = Key::new("lock:nightly-report")?;
//! assert!(limiter.acquire(&job, &lock, "host-1", ttl).await?.allowed);
//! assert!(limiter.acquire(&job, &lock, "host-1", ttl).await?.allowed, "re-entrant");
//! assert!(!limiter.acquire(&job, &lock, "host-2", ttl).await?.allowed);
//! clock.advance(ttl); // host-1 died without releasing
//! assert!(limiter.acquire(&job, &lock, "host-2", ttl).await?.allowed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```

pub mod adaptive;
pub mod algorithm;
mod clock;
mod decision;
mod error;
mod key;
mod limiter;
mod rule;
mod scope;
mod state;
pub mod step;
mod store;
pub mod time;

pub use algorithm::WarmUp;
pub use clock::{Clock, ManualClock, Sleep, SystemClock};
pub use decision::{Decision, Usage};
pub use error::{CheckError, KeyError, RuleError, StoreError};
pub use key::Key;
pub use limiter::{DirectLimiter, KeyedLimiter, Limiter, Paced, SyncStore, Wait, WaitStep};
pub use rule::{Algorithm, FailurePolicy, Lockout, Mode, Rule, MAX_SPAN};
pub use state::{Guard, Record, State};
pub use step::{Op, Outcome};
pub use store::{BlockedKey, BlockedKeys};
pub use store::{Decisions, MemoryStats, MemoryStore, MemoryStoreBuilder, Store};
pub use store::{ImportReport, SavedRecord, SnapshotError, StateSnapshot, MAX_SNAPSHOT_BYTES};
pub use store::{ScopedKey, ScopedLimits};

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
