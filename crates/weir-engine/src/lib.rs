//! # weir-engine
//!
//! Weir's decision engine: what `weir serve`, `weir proxy` and the RESP front end all run.
//! One [`Engine`] holds the rules in force (hot-reloaded; a bad file keeps the old rules),
//! the limiter over the chosen store (memory, or Redis / memcached behind the lease, over-
//! limit cache and failover guards), the metrics and the top-denied sketch, and decides in
//! one of two modes:
//!
//! - [`Engine::decide`]: **per descriptor**, as Envoy's rate limit API wants (each
//!   descriptor checked and charged on its own; quota mode; the overall code combined as
//!   envoyproxy/ratelimit does). The gRPC RLS API, `POST /v1/check`, `POST /json` and
//!   `WEIR.CHECK` use it.
//! - [`Engine::decide_all`]: **all-or-nothing**, for a caller that admits or refuses one
//!   request as a whole (`weir proxy`): a denied request consumes nothing anywhere.
//!
//! A front end whose clients send their own parameters (the RESP front end's `CL.THROTTLE`
//! and `THROTTLE`) checks its rule with [`Engine::check_rule`] (`direct.rs`): the same
//! store call, judgement of a failed store, decision counters and top-denied keys.
//!
//! Both match against the same rule snapshot, honour shadow rules, the global shadow mode
//! and `enforce_percent` alike, count in the same metrics, and judge a failing store with
//! one function (a full memory store under fail open lets the request through; anything
//! else is [`DecideError::Unavailable`], never a made-up answer).
//!
//! The path of one decision: a front end parses its request → `decide.rs` / `decide_all.rs`
//! match it against the snapshot in force (`rules.rs`, swapped by `reload.rs`) → one
//! limiter check per matched descriptor, or one all-or-nothing check, on the store
//! (`store.rs`: the memory store decides in place, and [`Engine::decide_all_now`] answers
//! without a future there; a network store's future is boxed) →
//! shadow / roll-out (`rollout.rs`) → metrics (`metrics/`) → a [`Verdict`] or an
//! [`AllVerdict`]. Front ends add only parsing and rendering.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use weir_config::Descriptor;
//! use weir_engine::{CheckRequest, Code, Engine, EngineSettings};
//!
//! // The built-in example rules on the memory store.
//! let engine = Engine::open(EngineSettings::default()).await?;
//! let request = CheckRequest {
//!     domain: "api".into(),
//!     descriptors: vec![Descriptor::new([("remote_address", "203.0.113.7")])],
//!     hits_addend: 1,
//! };
//! let verdict = engine.decide(&request).await?;
//! assert_eq!(verdict.overall, Code::Ok);
//! # Ok(()) }
//! ```
//!
//! A program also runs [`Engine::spawn_background`] (rule watch, memory sweep, decision
//! history) and ends with [`Lifecycle::run`], the one shutdown sequence of every front end.

mod block;
mod blocked;
mod capacity;
mod decide;
mod decide_all;
mod direct;
mod engine;
mod error;
mod heavy_hitters;
mod lifecycle;
mod metrics;
mod reload;
mod rollout;
mod rules;
mod runtime_dir;
mod settings;
mod shared_clock;
mod stamp;
mod state_file;
mod state_io;
mod store;
mod store_url;
pub mod thread_shard;
mod verdict;

pub use block::MAX_BLOCK;
pub use blocked::{BlockedEntry, BlockedList};
pub use decide::{deny_all, CheckRequest, DecideError};
pub use decide_all::{AllVerdict, LimitDecision};
pub use direct::RuleDecision;
pub use engine::{Engine, EngineLimiter, Readiness, ShareReport};
pub use error::EngineError;
pub use heavy_hitters::{HeavyHitter, TopDenied};
pub use lifecycle::{Lifecycle, ListenerTask};
pub use metrics::{BreakerState, UpstreamBreakerView, UpstreamBreakers};
pub use metrics::{DecisionOutcome, InFlight, Metrics, NearLimit, Panel, RuleCounters, Section};
pub use metrics::{Exposition, StatsdError, StatsdSettings};
pub use metrics::{HistoryView, SeriesView, HISTORY_SECONDS, MAX_SERIES, OTHER_RULES};
pub use metrics::{DIRECT_DOMAIN, DIRECT_RULES};
pub use reload::{stamp, ReloadSettings};
pub use rollout::enforced;
pub use rules::{ConfigStatus, ReloadOutcome, RuleBook, RuleCheck, RuleSource, Snapshot};
pub use settings::{EngineSettings, LimitOverrides};
pub use shared_clock::SharedClock;
pub use state_file::MIN_STATE_INTERVAL;
pub use store::{AnyStore, Guarded, StoreClock, StoreOptions, LIMIT_OVERRIDE_SHARE_PERCENT};
pub use store_url::{StoreSpec, StoreUrlError, SUPPORTED_STORES};
pub use verdict::{Code, MatchedRule, Status, Verdict};
/// How leased rules claim and age their slices ([`EngineSettings::lease`]).
pub use weir_resilience::LeaseConfig;

// The README's examples are compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
