//! [`Engine`]: the rules in force, the limiter over the chosen store, the metrics and the
//! top-denied sketch, built from [`EngineSettings`]. Every front end holds a clone (one
//! `Arc`) and decides through it: per descriptor (`decide.rs`, the RLS and HTTP APIs) or
//! all-or-nothing (`decide_all.rs`, `weir proxy`). This file holds what both modes share:
//! building, readiness, and the judgement of a failed store.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;
use tokio::task::JoinHandle;
use weir_core::{Clock, Limiter, Store};

use crate::capacity::CapacityWatch;
use crate::error::EngineError;
use crate::heavy_hitters::TopDenied;
use crate::metrics::{DirectCounters, History, HistoryView, Metrics, NearLimit};
use crate::rules::{ConfigStatus, ReloadOutcome, RuleBook};
use crate::settings::EngineSettings;
use crate::shared_clock::SharedClock;
use crate::state_file::{StateFile, StateSaver};
use crate::store::AnyStore;

/// The limiter the engine runs.
pub type EngineLimiter = Limiter<AnyStore, SharedClock>;

/// Decides requests: the limiter, the rules, and what is counted on the way. Cheap to
/// clone (one `Arc`).
#[derive(Debug, Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limiter: EngineLimiter,
    rules: Arc<RuleBook>,
    metrics: Arc<Metrics>,
    top_denied: TopDenied,
    /// Denials not enforced (shadow mode, roll-out): apart, so they never rank as denied.
    top_shadow_denied: TopDenied,
    history: History,
    /// `check_rule`'s own rules' counters (`direct.rs`).
    direct: DirectCounters,
    near: NearLimit,
    capacity: CapacityWatch,
    settings: EngineSettings,
    /// Set when shutdown begins: no longer ready, as ratelimit after SIGTERM.
    draining: AtomicBool,
    /// Where the memory store's state is kept across restarts, if anywhere.
    state_file: Option<Arc<StateFile>>,
}

/// What readiness probes report (`/readyz`, `/healthcheck`, gRPC health).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readiness {
    /// Whether the engine should receive traffic.
    pub ready: bool,
    /// The store's kind.
    pub store: &'static str,
    /// Whether the store answered a ping.
    pub store_reachable: bool,
    /// `store`, `fallback` (a guarded store that does not answer: each rule's failure
    /// policy decides) or `degraded` (the memory store refused new keys lately: not ready).
    pub mode: &'static str,
    /// Why it is not ready, or what covers a store that does not answer.
    pub detail: Option<String>,
    /// A network store's local fallback: each rule allows `limit / instances` per
    /// instance while its store part is down (and an overloaded instance claims at most
    /// `limit / instances` of a leased rule); `source` says whether that count was
    /// `stated` (`--instances`) or `learned` from the store's presence key.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback_share: Option<ShareReport>,
}

/// The local fallback's share, as readiness reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ShareReport {
    /// The instance count each limit is divided by.
    pub instances: u64,
    /// `stated` (`--instances`) or `learned` (the store's presence key counted more).
    pub source: &'static str,
    /// How many instances the presence key counted last, if it has answered.
    pub learned: Option<u64>,
}

impl Engine {
    /// Builds the store, loads the rules, and assembles the engine. Must run inside a tokio
    /// runtime. Fails if the rules or the store URL are invalid, or the state file cannot
    /// be used; reads the state file, if any, before returning.
    pub async fn open(settings: EngineSettings) -> Result<Engine, EngineError> {
        let state_file = StateFile::open(&settings)?;
        let store = AnyStore::open_with(
            &settings.store,
            settings.failover,
            settings.store_clock,
            &settings.store_options(),
        )?;
        let metrics = Arc::new(Metrics::new(store.kind()));
        if settings.statsd.is_some() {
            metrics.count_for_statsd();
        }
        let rules = RuleBook::open(
            settings.rules.clone(),
            settings.validate,
            Arc::clone(&metrics),
            settings.clock.clone(),
        )
        .await?;
        if let (Some(file), Some(memory)) = (&state_file, store.memory()) {
            // Rules from xDS are not in force yet: read under none, every record would be
            // dropped (lockouts lifted by a restart). Read with the first update instead.
            if rules.waiting().is_some() {
                file.defer();
            } else {
                file.load(memory, &rules, settings.clock.now_ns());
            }
        }
        Ok(Engine {
            inner: Arc::new(Inner {
                limiter: Limiter::new(store, settings.clock.clone()),
                rules: Arc::new(rules),
                metrics,
                top_denied: TopDenied::new(settings.top_denied_capacity),
                top_shadow_denied: TopDenied::new(settings.top_denied_capacity),
                history: History::new(),
                direct: DirectCounters::new(),
                near: NearLimit::new(settings.near_limit_ratio),
                capacity: CapacityWatch::default(),
                settings,
                draining: AtomicBool::new(false),
                state_file,
            }),
        })
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &EngineSettings {
        &self.inner.settings
    }

    /// The limiter (the admin API runs its operations on it).
    pub fn limiter(&self) -> &EngineLimiter {
        &self.inner.limiter
    }

    /// The store decisions are made on.
    pub fn store(&self) -> &AnyStore {
        self.inner.limiter.store()
    }

    /// The rules in force.
    pub fn rules(&self) -> &Arc<RuleBook> {
        &self.inner.rules
    }

    /// Puts rules loaded elsewhere (an xDS update) in force: [`RuleBook::apply`], then, with
    /// the first rules in force, the state file that waited for them.
    pub fn apply_rules(
        &self,
        loaded: Result<weir_config::RuleSet, weir_config::ConfigError>,
        trigger: &'static str,
    ) -> ReloadOutcome {
        let outcome = self.inner.rules.apply(loaded, trigger);
        if let (ReloadOutcome::Swapped(_), Some(file), Some(memory)) =
            (&outcome, &self.inner.state_file, self.store().memory())
        {
            file.load_deferred(
                memory,
                &self.inner.rules,
                self.inner.settings.clock.now_ns(),
            );
        }
        outcome
    }

    /// The rules' status.
    pub fn config_status(&self) -> ConfigStatus {
        self.inner.rules.status()
    }

    /// Reads the rules again now (the admin API's "reload").
    pub async fn reload(&self) -> ReloadOutcome {
        self.inner.rules.reload("admin").await
    }

    /// The counters of `check_rule`'s own rules.
    pub(crate) fn direct(&self) -> &DirectCounters {
        &self.inner.direct
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.inner.metrics
    }

    /// The metrics as OpenMetrics text.
    pub fn render_metrics(&self) -> String {
        self.inner.metrics.render(self.store())
    }

    /// The metrics in `format` (what `/metrics` serves: [`Exposition::negotiate`](crate::Exposition::negotiate)).
    pub fn render_metrics_as(&self, format: crate::Exposition) -> String {
        self.inner.metrics.render_as(self.store(), format)
    }

    /// The keys denied most, counting enforced denials only.
    pub fn top_denied(&self) -> &TopDenied {
        &self.inner.top_denied
    }

    /// The keys whose denials were not enforced most often (a shadow rule, the global
    /// shadow mode, or outside a rule's `enforce_percent`): what enforcing would deny.
    pub fn top_shadow_denied(&self) -> &TopDenied {
        &self.inner.top_shadow_denied
    }

    /// Counts a denial of `key` under `rule_id` in the sketch it belongs to: enforced, or
    /// not (`shadow_denied`).
    pub(crate) fn record_denial(
        &self,
        key: &weir_core::Key,
        rule_id: &Arc<str>,
        shadow_denied: bool,
    ) {
        if shadow_denied {
            self.inner.top_shadow_denied.record(key, rule_id);
        } else {
            self.inner.top_denied.record(key, rule_id);
        }
    }

    /// Decisions per second, allowed and denied, per rule over the last `seconds` (at most
    /// five minutes; the dashboard's chart), counted up to now.
    pub fn decision_history(&self, seconds: usize) -> HistoryView {
        self.sample_history();
        self.inner.history.view(seconds)
    }

    fn sample_history(&self) {
        let snapshot = self.inner.rules.snapshot();
        let now_ns = self.inner.limiter.clock().now_ns();
        self.inner
            .history
            .sample(&snapshot.rules, &snapshot.counters, now_ns);
    }

    /// Whether the global shadow mode is on.
    pub fn global_shadow(&self) -> bool {
        self.inner.settings.shadow
    }

    /// The near-limit threshold of the metrics.
    pub(crate) fn near(&self) -> NearLimit {
        self.inner.near
    }

    /// The full memory store's refusals (recorded by the decide path).
    pub(crate) fn capacity(&self) -> &CapacityWatch {
        &self.inner.capacity
    }

    /// Whether a full memory store refused new keys in the last few seconds.
    pub fn capacity_degraded(&self) -> bool {
        self.inner
            .capacity
            .degraded(self.inner.limiter.clock().now_ns())
    }

    /// Marks the engine as shutting down: from now on it is not ready (readiness probes
    /// say so while in-flight requests finish).
    pub fn start_draining(&self) {
        self.inner.draining.store(true, Ordering::Release);
    }

    /// Whether the engine can decide: the store answers, or a failover guard's failure
    /// policies decide while it does not (unless `ready_in_fallback` is off). Not ready
    /// once shutdown began, while a full memory store refuses new keys, or while rules from
    /// xDS wait for the management server's first update, nor, with `ready_needs_rules`,
    /// while the rules in force define no domain.
    pub async fn readiness(&self) -> Readiness {
        let store = self.store();
        let ping = store.ping().await;
        let mode = match store.failover_stats() {
            Some(stats) => stats.mode.as_str(),
            None => "store",
        };
        let reachable = ping.is_ok();
        let share = store.fallback_share().map(|s| ShareReport {
            instances: s.instances,
            source: s.source.as_str(),
            learned: s.learned,
        });
        let not_ready = |detail: String| Readiness {
            ready: false,
            store: store.kind(),
            store_reachable: reachable,
            mode,
            detail: Some(detail),
            fallback_share: share,
        };
        if self.inner.draining.load(Ordering::Acquire) {
            return not_ready("shutting down".to_string());
        }
        if let Some(waiting) = self.inner.rules.waiting() {
            return not_ready(waiting);
        }
        if self.settings().ready_needs_rules
            && self.inner.rules.snapshot().rules.domains().next().is_none()
        {
            return not_ready(
                "no rule file with a domain is loaded yet (ready once one is: \
                 HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)"
                    .to_string(),
            );
        }
        let fallback = mode == "fallback" || ping.is_err();
        if fallback && store.is_guarded() && !self.settings().ready_in_fallback {
            return not_ready(match &ping {
                Err(error) => format!(
                    "{error}; not ready while the store does not answer (ready_in_fallback is off)"
                ),
                Ok(()) => "the store is in fallback (its circuit is open); not ready until it \
                           closes (ready_in_fallback is off)"
                    .to_string(),
            });
        }
        if ping.is_ok() && self.capacity_degraded() {
            return Readiness {
                mode: "degraded",
                ..not_ready(
                    "the memory store is full of limited keys and refused new keys in the last \
                     10 s (each rule's failure policy decides for them)"
                        .to_string(),
                )
            };
        }
        match ping {
            Ok(()) => Readiness {
                ready: true,
                store: store.kind(),
                store_reachable: true,
                mode,
                detail: None,
                fallback_share: share,
            },
            Err(error) if store.is_guarded() => Readiness {
                ready: true,
                store: store.kind(),
                store_reachable: false,
                mode,
                detail: Some(format!(
                    "{error}; each rule's failure policy decides until it answers"
                )),
                fallback_share: share,
            },
            Err(error) => not_ready(error.to_string()),
        }
    }

    /// Starts what a running engine does besides deciding: the rule files' watch and poll,
    /// the memory store's sweep, and the decision history's sampling. Every front end runs
    /// them; abort the handles to stop (`Lifecycle::run` does).
    pub fn spawn_background(&self) -> Vec<JoinHandle<()>> {
        [
            self.spawn_sweeper(),
            crate::reload::spawn(Arc::clone(self.rules()), self.settings().reload),
            self.state_saver().map(StateSaver::spawn),
            Some(self.spawn_history_sampler()),
            self.spawn_statsd(),
            self.store().spawn_presence(self.limiter().clock().clone()),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// ratelimit's statsd counters, if asked for: every flush interval, the counts of the
    /// rule snapshot in force and of the service since the last flush (`metrics/statsd.rs`). A socket that
    /// cannot be set up is a WARN (statsd is reporting, never a reason not to decide).
    fn spawn_statsd(&self) -> Option<JoinHandle<()>> {
        let settings = self.settings().statsd.clone()?;
        let client = match crate::metrics::statsd_client(&settings) {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%error, "statsd counters are not sent");
                return None;
            }
        };
        tracing::info!(addr = %settings.addr, "sending envoyproxy/ratelimit's statsd counters");
        let book = Arc::clone(self.rules());
        let metrics = Arc::clone(self.metrics());
        Some(tokio::spawn(async move {
            let every = settings
                .flush_interval
                .max(std::time::Duration::from_millis(1));
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticks.tick().await; // the first tick is immediate
            loop {
                ticks.tick().await;
                crate::metrics::statsd_flush(
                    &metrics,
                    &book.snapshot().counters,
                    &client,
                    &settings,
                );
            }
        }))
    }

    /// Samples the decision history at each second of the engine's clock (a `ManualClock`
    /// wakes it when a test moves it past one).
    fn spawn_history_sampler(&self) -> JoinHandle<()> {
        let engine = self.clone();
        tokio::spawn(async move {
            loop {
                let clock = engine.limiter().clock();
                let next_second = (clock.now_ns() / 1_000_000_000)
                    .saturating_add(1)
                    .saturating_mul(1_000_000_000);
                clock.sleep_until(next_second).await;
                engine.sample_history();
            }
        })
    }

    /// Writes the memory store's state file now, if the engine keeps one
    /// ([`EngineSettings::state_file`]): what a front end calls once its listeners have
    /// drained (the file is also written every `state_interval`). `None` without a state
    /// file; a failure is also logged (WARN, naming the file: the previous file stays).
    pub async fn save_state(&self) -> Option<std::io::Result<usize>> {
        Some(self.state_saver()?.save().await)
    }

    /// What writing the state file needs, if the engine keeps one.
    fn state_saver(&self) -> Option<StateSaver> {
        Some(StateSaver {
            file: Arc::clone(self.inner.state_file.as_ref()?),
            store: self.store().memory()?.clone(),
            rules: Arc::clone(self.rules()),
            clock: self.inner.limiter.clock().clone(),
        })
    }

    /// Sweeps expired keys out of the memory store every `sweep_interval`.
    fn spawn_sweeper(&self) -> Option<JoinHandle<()>> {
        self.store().memory()?;
        let engine = self.clone();
        let every = self
            .settings()
            .sweep_interval
            .max(std::time::Duration::from_millis(10));
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let limiter = engine.limiter();
                if let Some(memory) = limiter.store().memory() {
                    let swept = memory.sweep(limiter.clock().now_ns());
                    if swept > 0 {
                        tracing::debug!(swept, "memory store swept");
                    }
                }
            }
        }))
    }
}
