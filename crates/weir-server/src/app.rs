//! [`App`]: one server's shared state (the decision engine, its settings and rules), built
//! from [`Settings`]. Every API handler holds a clone; the HTTP router and the gRPC service
//! are built from it, so tests can drive the router with `oneshot` and no socket.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde::Serialize;
use weir_core::{Limiter, Store};

use crate::decide::Engine;
use crate::error::ServerError;
use crate::heavy_hitters::TopDenied;
use crate::metrics::Metrics;
use crate::rules::{ConfigStatus, ReloadOutcome, RuleBook};
use crate::settings::Settings;
use crate::store::{AnyStore, StoreOptions};

/// A server's state. Cheap to clone (one `Arc`).
#[derive(Debug, Clone)]
pub struct App {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    engine: Engine,
    settings: Settings,
    /// Set when shutdown begins: no longer ready, as ratelimit after SIGTERM.
    draining: AtomicBool,
}

/// What `/readyz` reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Readiness {
    /// Whether the server should receive traffic.
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
}

impl App {
    /// Builds the store, loads the rules, and assembles the engine. Must run inside a tokio
    /// runtime. Fails if the rules or the store URL are invalid.
    pub async fn new(settings: Settings) -> Result<App, ServerError> {
        let options = StoreOptions {
            prefix: settings.key_prefix.clone(),
            redis_batch_wait: settings.redis_batch_wait,
            redis_batch_size: Some(settings.redis_batch_size),
            lease: settings.lease,
        };
        let store = AnyStore::open_with(
            &settings.store,
            settings.failover,
            settings.store_clock,
            &options,
        )?;
        let metrics = Arc::new(Metrics::new(store.kind()));
        let rules = RuleBook::open(
            settings.rules.clone(),
            settings.validate,
            Arc::clone(&metrics),
            settings.clock.clone(),
        )
        .await?;
        let engine = Engine::new(
            Limiter::new(store, settings.clock.clone()),
            Arc::new(rules),
            metrics,
            TopDenied::new(settings.top_denied_capacity),
            settings.shadow,
        )
        .with_near_limit(crate::metrics::NearLimit::new(settings.near_limit_ratio));
        Ok(App {
            inner: Arc::new(Inner {
                engine,
                settings,
                draining: AtomicBool::new(false),
            }),
        })
    }

    /// The decision engine.
    pub fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    /// The settings it was built with.
    pub fn settings(&self) -> &Settings {
        &self.inner.settings
    }

    /// The rules' status.
    pub fn config_status(&self) -> ConfigStatus {
        self.engine().rules().status()
    }

    /// Reads the rules again now (the admin API's "reload").
    pub async fn reload(&self) -> ReloadOutcome {
        self.engine().rules().reload("admin").await
    }

    /// The rule book (for the watcher and tests).
    pub fn rule_book(&self) -> &Arc<RuleBook> {
        self.engine().rules()
    }

    /// Marks the server as shutting down: from now on it is not ready (`/readyz`,
    /// `/healthcheck` and the gRPC health service say so while in-flight requests finish).
    pub fn start_draining(&self) {
        self.inner.draining.store(true, Ordering::Release);
    }

    /// Whether the server can decide: the store answers, or a failover guard's failure
    /// policies decide while it does not (unless `Settings::ready_in_fallback` is off).
    /// Not ready once shutdown began or while a full memory store refuses new keys.
    pub async fn readiness(&self) -> Readiness {
        let store = self.engine().limiter().store();
        let ping = store.ping().await;
        let mode = match store.failover_stats() {
            Some(stats) => stats.mode.as_str(),
            None => "store",
        };
        if self.inner.draining.load(Ordering::Acquire) {
            return Readiness {
                ready: false,
                store: store.kind(),
                store_reachable: ping.is_ok(),
                mode,
                detail: Some("shutting down".to_string()),
            };
        }
        let fallback = mode == "fallback" || ping.is_err();
        if fallback && store.is_guarded() && !self.settings().ready_in_fallback {
            return Readiness {
                ready: false,
                store: store.kind(),
                store_reachable: ping.is_ok(),
                mode,
                detail: Some(match ping {
                    Err(error) => format!(
                        "{error}; not ready while the store does not answer (ready_in_fallback is off)"
                    ),
                    Ok(()) => "the store is in fallback (its circuit is open); not ready until it \
                               closes (ready_in_fallback is off)"
                        .to_string(),
                }),
            };
        }
        if ping.is_ok() && self.engine().capacity_degraded() {
            return Readiness {
                ready: false,
                store: store.kind(),
                store_reachable: true,
                mode: "degraded",
                detail: Some(
                    "the memory store is full of limited keys and refused new keys in the last \
                     10 s (each rule's failure policy decides for them)"
                        .to_string(),
                ),
            };
        }
        match ping {
            Ok(()) => Readiness {
                ready: true,
                store: store.kind(),
                store_reachable: true,
                mode,
                detail: None,
            },
            Err(error) if store.is_guarded() => Readiness {
                ready: true,
                store: store.kind(),
                store_reachable: false,
                mode,
                detail: Some(format!(
                    "{error}; each rule's failure policy decides until it answers"
                )),
            },
            Err(error) => Readiness {
                ready: false,
                store: store.kind(),
                store_reachable: false,
                mode,
                detail: Some(error.to_string()),
            },
        }
    }

    /// The metrics as OpenMetrics text.
    pub fn render_metrics(&self) -> String {
        self.engine()
            .metrics()
            .render(self.engine().limiter().store())
    }

    /// The metrics handle.
    pub fn metrics(&self) -> &Arc<Metrics> {
        self.engine().metrics()
    }
}
