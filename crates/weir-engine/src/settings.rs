//! What the engine can be told: the rules, the store and its guards, the clock, shadow
//! mode, reload and sweep. Front ends embed it in their own settings (`weir serve`'s
//! `Settings::engine`, `weir proxy`'s through it); tests build it directly and inject a
//! `ManualClock`.

use std::path::PathBuf;
use std::time::Duration;

use weir_resilience::{FailoverConfig, LeaseConfig};

use crate::reload::ReloadSettings;
use crate::rules::{RuleCheck, RuleSource};
use crate::shared_clock::SharedClock;
use crate::store::{StoreClock, StoreOptions};
use crate::store_url::StoreSpec;

/// Whether a request may name its own limit for a descriptor (Envoy's
/// `RateLimitOverride`; `limit` in `/v1/check` and `/json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum LimitOverrides {
    /// Taken, as envoyproxy/ratelimit takes them (the default): the descriptor is limited
    /// by the request's limit instead of the configured one, counted in a key space of its
    /// own; the configured rule's deny, block or lockout still holds.
    #[default]
    Allow,
    /// Refused: a request carrying one is answered 400 / `INVALID_ARGUMENT`, naming the
    /// option. For deployments whose clients should never choose their limits.
    Deny,
}

/// Settings of one engine, with the documented defaults.
///
/// ```
/// use weir_engine::EngineSettings;
///
/// let mut settings = EngineSettings::default(); // example rules, memory store
/// settings.shadow = true;
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineSettings {
    /// The rules: a file or directory, or the built-in example (the default).
    pub rules: RuleSource,
    /// The store (default: the memory store).
    pub store: StoreSpec,
    /// The failover guard of a network store: timeouts, breaker, instance count.
    pub failover: FailoverConfig,
    /// The prefix of every key a network store writes (default: the store's, `weir`).
    /// Instances sharing limits must use the same one.
    pub key_prefix: Option<String>,
    /// Redis: coalesce concurrent decisions into one script call, gathered for at most this
    /// long (default: off; envoyproxy/ratelimit's `REDIS_PIPELINE_WINDOW`).
    pub redis_batch_wait: Option<Duration>,
    /// Redis: the most decisions in one batched call (default 100).
    pub redis_batch_size: usize,
    /// How rules with `mode: leased` claim and age their slices on a network store (the
    /// instance count is the failover's).
    pub lease: LeaseConfig,
    /// Whose clock a network store decides by (default: the store's own, where it has one).
    pub store_clock: StoreClock,
    /// Global shadow mode: every denial is counted and reported, none enforced.
    pub shadow: bool,
    /// Whether requests may carry limit overrides (default: allowed, as
    /// envoyproxy/ratelimit).
    pub limit_overrides: LimitOverrides,
    /// The share of a limit used past which an allowed decision counts as `near_limit`
    /// (default 0.8, envoyproxy/ratelimit's `NEAR_LIMIT_RATIO`).
    pub near_limit_ratio: f64,
    /// The clock of every decision (default: the system clock).
    pub clock: SharedClock,
    /// When the rules are read again.
    pub reload: ReloadSettings,
    /// Whether an engine whose network store does not answer (each rule's failure policy
    /// deciding) is still ready (default yes). Off, readiness says not ready then, as
    /// envoyproxy/ratelimit with `REDIS_HEALTH_CHECK_ACTIVE_CONNECTION`.
    pub ready_in_fallback: bool,
    /// Whether the engine is ready only once the rules in force define at least one
    /// domain (default no: an empty rule directory is ready, every domain unknown). On,
    /// as envoyproxy/ratelimit with `HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED`: not ready
    /// until a rule file (or xDS update) with a domain is in force, and not ready again
    /// if a reload leaves none.
    pub ready_needs_rules: bool,
    /// How often the memory store is swept of expired keys (default 10 s).
    pub sweep_interval: Duration,
    /// How many keys each shard of the top-denied sketch tracks (default 256; a shard per
    /// recording thread, up to twice the cores).
    pub top_denied_capacity: usize,
    /// A further check of the rules, at start-up and on every reload, for a front end that
    /// cannot run every valid rule set (`weir proxy`); a rule set it refuses is a bad file
    /// (the old rules stay). Default: none.
    pub validate: Option<RuleCheck>,
    /// The memory store's state file: its limited, blocked and locked-out keys are read
    /// from it at start and written to it every `state_interval` and at shutdown
    /// ([`Engine::save_state`](crate::Engine::save_state)), so a restart keeps lockouts.
    /// Memory store only. Default: none.
    pub state_file: Option<PathBuf>,
    /// How often the state file is written (default 30 s).
    pub state_interval: Duration,
    /// Use a state file in a directory that other users may write (group- or
    /// world-writable, or another user's). Off by default: such a directory is refused at
    /// start, since whoever can write there can replace the state file or plant files
    /// beside it.
    pub state_file_allow_shared_dir: bool,
    /// envoyproxy/ratelimit's statsd counters (`USE_STATSD`): where and how often. Default:
    /// none.
    pub statsd: Option<crate::StatsdSettings>,
}

impl Default for EngineSettings {
    fn default() -> Self {
        Self {
            rules: RuleSource::Example,
            store: StoreSpec::Memory {
                capacity: StoreSpec::DEFAULT_MEMORY_CAPACITY,
            },
            failover: FailoverConfig::default(),
            key_prefix: None,
            redis_batch_wait: None,
            redis_batch_size: StoreOptions::REDIS_BATCH_DECISIONS,
            lease: LeaseConfig::default(),
            store_clock: StoreClock::default(),
            shadow: false,
            limit_overrides: LimitOverrides::Allow,
            near_limit_ratio: 0.8,
            clock: SharedClock::default(),
            reload: ReloadSettings::default(),
            ready_in_fallback: true,
            ready_needs_rules: false,
            sweep_interval: Duration::from_secs(10),
            top_denied_capacity: 256,
            validate: None,
            state_file: None,
            state_interval: Duration::from_secs(30),
            state_file_allow_shared_dir: false,
            statsd: None,
        }
    }
}

impl EngineSettings {
    /// Settings with rules from `path` (a file or a directory).
    pub fn with_rules(mut self, path: impl Into<PathBuf>) -> Self {
        self.rules = RuleSource::Path(path.into());
        self
    }

    /// How the store is built, besides its URL.
    pub(crate) fn store_options(&self) -> StoreOptions {
        StoreOptions {
            prefix: self.key_prefix.clone(),
            redis_batch_wait: self.redis_batch_wait,
            redis_batch_size: Some(self.redis_batch_size),
            lease: self.lease,
        }
    }
}
