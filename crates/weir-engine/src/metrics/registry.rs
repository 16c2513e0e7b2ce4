//! [`Metrics`]: every metric family of the engine and its front ends, registered once, and the text
//! `/metrics` serves (OpenMetrics, or the Prometheus text format derived from it:
//! `exposition.rs`). Store and cache counters kept by `weir-resilience` are copied in at
//! scrape time.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use super::sharded::{HotCounter, HotGauge};
use prometheus_client::registry::{Registry, Unit};
use weir_config::RuleSet;
use weir_resilience::{FailoverStats, Mode};

use super::decisions::{DecisionLabels, DecisionOutcome, RuleCounters, UNKNOWN_DOMAIN};
use super::exposition::{to_prometheus, Exposition};
use super::histogram::Latency;
use super::hits::HitFamilies;
use super::panels::{Panel, Panels};
use super::process::ProcessMetrics;
use super::service::{ServiceFamilies, BARE_COUNTERS};
use super::upstreams::{BreakerFamilies, UpstreamBreakerView, UpstreamBreakers};
use crate::store::AnyStore;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct RequestLabels {
    api: &'static str,
    result: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ApiLabels {
    api: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct BuildLabels {
    version: &'static str,
}

/// The APIs of `weir_requests_total` and `weir_request_duration_seconds`.
const APIS: [&str; 6] = ["grpc", "http", "json", "lease", "admin", "resp"];

/// The `result` labels of `weir proxy`'s requests (`api="proxy"`), the most common first.
const PROXY_RESULTS: [&str; 7] = [
    "ok",
    "over_limit",
    "client_error",
    "bad_gateway",
    "unavailable",
    "gateway_timeout",
    "error",
];

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StoreLabels {
    store: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct StoreErrorLabels {
    store: &'static str,
    kind: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// Every metric of the engine and its front ends.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    store_kind: &'static str,
    decisions: Family<DecisionLabels, Counter>,
    requests: Family<RequestLabels, HotCounter>,
    /// Every (api, result) counter of `requests`, built up front: counting a request is
    /// a scan of a few pointers and one atomic add, no lock and no hashing.
    request_counters: Vec<(RequestLabels, HotCounter)>,
    /// `weir proxy`'s counters of `requests`, one per [`PROXY_RESULTS`], each made on its
    /// first request (a series shows once counted, as the family's do) and kept: no lock
    /// and no hashing of the labels a request (the family's SipHash and lock were some
    /// 600 instructions of every proxied request).
    proxy_counters: [OnceLock<HotCounter>; PROXY_RESULTS.len()],
    store_duration: Latency,
    store_errors: Family<StoreErrorLabels, Counter>,
    fallback: Family<StoreLabels, Gauge>,
    mode_changes: Counter,
    fallback_decisions: Counter,
    over_limit_hits: Counter,
    memory_keys: Gauge,
    reloads: Family<ResultLabels, Counter>,
    config_ok: Gauge,
    config_rules: Gauge,
    admin_denied: Counter,
    pub(super) in_flight: HotGauge,
    request_duration: Family<ApiLabels, Latency>,
    /// Every API's histogram of `request_duration`, built up front (as `request_counters`).
    request_latencies: Vec<(&'static str, Latency)>,
    hit_families: HitFamilies,
    service: ServiceFamilies,
    process: ProcessMetrics,
    seen: Mutex<Seen>,
    sections: Sections,
    panels: Panels,
    // weir proxy's upstream circuit breakers (none for the other front ends).
    breaker_families: BreakerFamilies,
    upstream_breakers: OnceLock<Arc<dyn UpstreamBreakers>>,
}

/// A front end's own series, written as OpenMetrics text at every scrape (e.g. `weir
/// proxy`'s in-flight limit). Each writes whole families (`# HELP`, `# TYPE`, samples).
pub type Section = Box<dyn Fn(&mut String) + Send + Sync>;

/// The sections added with [`Metrics::add_section`].
#[derive(Default)]
struct Sections(Mutex<Vec<Section>>);

impl std::fmt::Debug for Sections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().unwrap_or_else(PoisonError::into_inner).len();
        write!(f, "Sections({n})")
    }
}

/// Counters of `weir-resilience` at the last scrape, to add only what is new.
#[derive(Debug, Default)]
struct Seen {
    failover: Option<FailoverStats>,
    over_limit_hits: u64,
    breakers: Vec<UpstreamBreakerView>,
}

impl Metrics {
    /// The metrics of a server on a store of kind `store_kind` (`memory`, `redis`, …).
    pub fn new(store_kind: &'static str) -> Self {
        let mut registry = Registry::default();
        let decisions = Family::<DecisionLabels, Counter>::default();
        registry.register(
            "weir_decisions",
            "Descriptor decisions by domain, rule and outcome",
            decisions.clone(),
        );
        let requests = Family::<RequestLabels, HotCounter>::default();
        registry.register(
            "weir_requests",
            "Requests by API (grpc, http, json, lease, admin) and result (ok, over_limit, invalid, error)",
            requests.clone(),
        );
        let store_duration = Latency::exponential(0.000_025, 2.0, 16);
        registry.register_with_unit(
            "weir_store_duration",
            "Time one store call took (check, including a failover's fallback)",
            Unit::Seconds,
            store_duration.clone(),
        );
        let store_errors = Family::<StoreErrorLabels, Counter>::default();
        registry.register(
            "weir_store_errors",
            "Store calls that failed (error, timeout, full)",
            store_errors.clone(),
        );
        let fallback = Family::<StoreLabels, Gauge>::default();
        registry.register(
            "weir_store_fallback",
            "1 while the store is considered down and each rule's failure policy decides",
            fallback.clone(),
        );
        let mode_changes = Counter::default();
        registry.register(
            "weir_store_mode_changes",
            "Times the failover circuit opened or closed",
            mode_changes.clone(),
        );
        let fallback_decisions = Counter::default();
        registry.register(
            "weir_store_fallback_decisions",
            "Decisions made by a failure policy instead of the store",
            fallback_decisions.clone(),
        );
        let over_limit_hits = Counter::default();
        registry.register(
            "weir_over_limit_cache_hits",
            "Checks of an already denied key answered without a store round trip",
            over_limit_hits.clone(),
        );
        let memory_keys = Gauge::default();
        registry.register(
            "weir_memory_store_keys",
            "Keys held by the embedded memory store",
            memory_keys.clone(),
        );
        let reloads = Family::<ResultLabels, Counter>::default();
        registry.register(
            "weir_config_reloads",
            "Rule reloads by result (success, failure)",
            reloads.clone(),
        );
        let config_ok = Gauge::default();
        registry.register(
            "weir_config_last_reload_successful",
            "1 if the last reload attempt succeeded (the rules in use are the file's), else 0",
            config_ok.clone(),
        );
        let config_rules = Gauge::default();
        registry.register(
            "weir_config_rules",
            "Rules in the active rule set",
            config_rules.clone(),
        );
        let admin_denied = Counter::default();
        registry.register(
            "weir_admin_unauthorized",
            "Admin API calls refused for a missing or wrong token",
            admin_denied.clone(),
        );
        let in_flight = HotGauge::default();
        registry.register(
            "weir_http_requests_in_flight",
            "HTTP requests being handled now",
            in_flight.clone(),
        );
        let request_duration = Family::<ApiLabels, Latency>::new_with_constructor(
            (|| Latency::exponential(0.000_1, 2.0, 16)) as fn() -> Latency,
        );
        registry.register_with_unit(
            "weir_request_duration",
            "Time one request took, by API (grpc, http, json, lease, admin), from its arrival to its answer",
            Unit::Seconds,
            request_duration.clone(),
        );
        let build_info = Family::<BuildLabels, Gauge>::default();
        registry.register(
            "weir_build_info",
            "Always 1: the running Weir's version",
            build_info.clone(),
        );
        build_info
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION"),
            })
            .set(1);
        let hit_families = HitFamilies::register(&mut registry);
        let process = ProcessMetrics::register(&mut registry);
        let breaker_families = BreakerFamilies::register(&mut registry);
        // Series that alerts use exist from the start, at zero.
        let request_latencies: Vec<(&'static str, Latency)> = APIS
            .into_iter()
            .map(|api| {
                (
                    api,
                    request_duration.get_or_create(&ApiLabels { api }).clone(),
                )
            })
            .collect();
        let grpc_latency = request_duration
            .get_or_create(&ApiLabels { api: "grpc" })
            .clone();
        let service = ServiceFamilies::register(&mut registry, &grpc_latency);
        fallback
            .get_or_create(&StoreLabels { store: store_kind })
            .set(0);
        for kind in ["error", "timeout", "full"] {
            let _ = store_errors.get_or_create(&StoreErrorLabels {
                store: store_kind,
                kind,
            });
        }
        for result in ["success", "failure"] {
            let _ = reloads.get_or_create(&ResultLabels { result });
        }
        config_ok.set(1);
        let request_counters = APIS
            .into_iter()
            .flat_map(|api| {
                ["ok", "over_limit", "invalid", "error"].map(|result| RequestLabels { api, result })
            })
            .map(|labels| {
                let counter = requests.get_or_create(&labels).clone();
                (labels, counter)
            })
            .collect();
        Self {
            registry,
            store_kind,
            decisions,
            requests,
            request_counters,
            proxy_counters: Default::default(),
            store_duration,
            store_errors,
            fallback,
            mode_changes,
            fallback_decisions,
            over_limit_hits,
            memory_keys,
            reloads,
            config_ok,
            config_rules,
            admin_denied,
            in_flight,
            request_duration,
            request_latencies,
            hit_families,
            service,
            process,
            seen: Mutex::default(),
            sections: Sections::default(),
            panels: Panels::default(),
            breaker_families,
            upstream_breakers: OnceLock::new(),
        }
    }

    /// Adds series of a front end's own to every scrape, before the closing `# EOF`.
    pub fn add_section(&self, section: Section) {
        self.sections
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(section);
    }

    /// Pre-built decision counters for every rule of `rules`.
    pub fn rule_counters(&self, rules: &RuleSet) -> RuleCounters {
        let mut by_rule = foldhash::HashMap::default();
        let mut no_rule = foldhash::HashMap::default();
        let mut hits = foldhash::HashMap::default();
        for info in rules.rules() {
            if !info.is_unlimited() {
                hits.insert(
                    Arc::clone(&info.id),
                    self.hit_families.counters(&info.domain, &info.id),
                );
            }
            let counters = DecisionOutcome::RULE_OUTCOMES.map(|outcome| {
                self.decisions.get_or_create_owned(&DecisionLabels {
                    domain: info.domain.to_string(),
                    rule: info.id.to_string(),
                    outcome,
                })
            });
            by_rule.insert(Arc::clone(&info.id), counters);
        }
        for domain in rules.domains() {
            let counter = self.decisions.get_or_create_owned(&DecisionLabels {
                domain: domain.to_string(),
                rule: String::new(),
                outcome: DecisionOutcome::NoRule,
            });
            no_rule.insert(Arc::<str>::from(domain), counter);
        }
        let unknown_domain = self.decisions.get_or_create_owned(&DecisionLabels {
            domain: UNKNOWN_DOMAIN.to_string(),
            rule: String::new(),
            outcome: DecisionOutcome::NoRule,
        });
        RuleCounters {
            by_rule,
            no_rule,
            unknown_domain,
            family: self.decisions.clone(),
            hits,
            hit_families: self.hit_families.clone(),
        }
    }

    /// The decision counter of (`domain`, `rule`, `outcome`), made if new: for callers
    /// that keep it to count in place (`Engine::check_rule`'s own rules).
    pub(crate) fn decision_counter(
        &self,
        domain: &str,
        rule: &str,
        outcome: DecisionOutcome,
    ) -> Counter {
        self.decisions.get_or_create_owned(&DecisionLabels {
            domain: domain.to_string(),
            rule: rule.to_string(),
            outcome,
        })
    }

    /// Counts one request of `api` with `result` (a `grpc` one also as envoyproxy/ratelimit
    /// counts a `ShouldRateLimit` call: `service.rs`).
    pub fn request(&self, api: &'static str, result: &'static str) {
        if api == "grpc" {
            self.service.should_rate_limit(result);
        }
        let labels = RequestLabels { api, result };
        if api == "proxy" {
            if let Some(i) = PROXY_RESULTS.iter().position(|r| *r == result) {
                if let Some(slot) = self.proxy_counters.get(i) {
                    slot.get_or_init(|| self.requests.get_or_create(&labels).clone())
                        .inc();
                    return;
                }
            }
        }
        match self.request_counters.iter().find(|(l, _)| *l == labels) {
            Some((_, counter)) => counter.inc(),
            None => self.requests.get_or_create(&labels).inc(),
        };
    }

    /// Records how long one request of `api` took.
    pub fn request_duration(&self, api: &'static str, took: Duration) {
        if api == "grpc" {
            self.service.response_times.record(took);
        }
        match self.request_latencies.iter().find(|(a, _)| *a == api) {
            Some((_, latency)) => latency.observe(took),
            None => self
                .request_duration
                .get_or_create(&ApiLabels { api })
                .observe(took),
        }
    }

    /// Records one store call's duration.
    pub fn store_call(&self, took: Duration) {
        self.store_duration.observe(took);
    }

    /// Counts a store error seen by the server itself (an unguarded store).
    pub fn store_error(&self, kind: &'static str) {
        self.store_errors
            .get_or_create(&StoreErrorLabels {
                store: self.store_kind,
                kind,
            })
            .inc();
    }

    /// Counts a reload attempt and sets the rule gauges.
    pub fn reload(&self, ok: bool, rules: usize) {
        let result = if ok { "success" } else { "failure" };
        self.reloads.get_or_create(&ResultLabels { result }).inc();
        self.service.config_loaded(ok);
        self.config_ok.set(i64::from(ok));
        if ok {
            self.config_rules
                .set(i64::try_from(rules).unwrap_or(i64::MAX));
        }
    }

    /// Sets the rule gauge for the rules loaded at startup.
    pub fn initial_rules(&self, rules: usize) {
        self.service.config_loaded(true);
        self.config_rules
            .set(i64::try_from(rules).unwrap_or(i64::MAX));
    }

    /// Counts a request over the limit answered `OK` by the global shadow mode
    /// (envoyproxy/ratelimit's `global_shadow_mode`).
    pub fn global_shadow_mode(&self) {
        self.service.global_shadow.inc();
    }

    /// envoyproxy/ratelimit's service-level series (statsd reads them).
    pub(crate) fn service(&self) -> &ServiceFamilies {
        &self.service
    }

    /// Counts an admin call refused for its token.
    pub fn admin_unauthorized(&self) {
        self.admin_denied.inc();
    }

    /// Counts ratelimit's hits for statsd too (`RuleHits::take`); the engine calls it when
    /// built with a statsd sink. Without it they are counted for Prometheus alone.
    pub fn count_for_statsd(&self) {
        self.hit_families.send_statsd();
    }

    /// `weir proxy`'s upstream circuit breakers, read at each scrape
    /// (`weir_upstream_breaker_*`; the dashboard reads them as a panel). The first call
    /// wins.
    pub fn watch_upstream_breakers(&self, breakers: Arc<dyn UpstreamBreakers>) {
        let _ = self.upstream_breakers.set(breakers);
    }

    /// Adds a front end's own panel to the dashboard, as `name` (`weir proxy`:
    /// `upstreams`, `in_flight`); a second panel of the same name replaces the first.
    pub fn add_panel(&self, name: &'static str, panel: Panel) {
        self.panels.add(name, panel);
    }

    /// Every front end panel now, by name (none outside `weir proxy`).
    pub fn panels(&self) -> serde_json::Map<String, serde_json::Value> {
        self.panels.views()
    }

    /// Copies the store's counters in and renders every metric in `format`.
    pub fn render_as(&self, store: &AnyStore, format: Exposition) -> String {
        let openmetrics = self.render(store);
        match format {
            Exposition::OpenMetrics => openmetrics,
            Exposition::Prometheus => to_prometheus(&openmetrics, &BARE_COUNTERS),
        }
    }

    /// Copies the store's counters in and renders every metric as OpenMetrics text.
    pub fn render(&self, store: &AnyStore) -> String {
        self.collect(store);
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
            let _ = writeln!(out, "# metrics could not be encoded");
        }
        let sections = self
            .sections
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !sections.is_empty() {
            let eof = out.ends_with("# EOF\n");
            if eof {
                out.truncate(out.len() - "# EOF\n".len());
            }
            for section in sections.iter() {
                section(&mut out);
            }
            if eof {
                out.push_str("# EOF\n");
            }
        }
        out
    }

    fn collect(&self, store: &AnyStore) {
        self.process.refresh();
        if let Some(memory) = store.memory() {
            self.memory_keys
                .set(i64::try_from(memory.len()).unwrap_or(i64::MAX));
        }
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(now) = store.failover_stats() {
            let before = seen.failover.unwrap_or(FailoverStats {
                mode: Mode::Store,
                parts: now.parts,
                open_parts: 0,
                mode_changes: 0,
                store_errors: 0,
                store_timeouts: 0,
                fallback_decisions: 0,
                reconciled_keys: 0,
            });
            let errors = |kind| {
                self.store_errors.get_or_create_owned(&StoreErrorLabels {
                    store: self.store_kind,
                    kind,
                })
            };
            errors("error").inc_by(now.store_errors.saturating_sub(before.store_errors));
            errors("timeout").inc_by(now.store_timeouts.saturating_sub(before.store_timeouts));
            self.mode_changes
                .inc_by(now.mode_changes.saturating_sub(before.mode_changes));
            self.fallback_decisions.inc_by(
                now.fallback_decisions
                    .saturating_sub(before.fallback_decisions),
            );
            self.fallback
                .get_or_create(&StoreLabels {
                    store: self.store_kind,
                })
                .set(i64::from(now.mode == Mode::Fallback));
            seen.failover = Some(now);
        }
        if let Some(cache) = store.over_limit_stats() {
            self.over_limit_hits
                .inc_by(cache.hits.saturating_sub(seen.over_limit_hits));
            seen.over_limit_hits = cache.hits;
        }
        if let Some(breakers) = self.upstream_breakers.get() {
            self.breaker_families
                .collect(&breakers.views(), &mut seen.breakers);
        }
    }
}
