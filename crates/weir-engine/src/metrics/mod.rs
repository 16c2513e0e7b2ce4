//! Prometheus metrics of `weir serve`, served at `/metrics` (the Prometheus text format, or
//! OpenMetrics to a client that accepts only that: `exposition.rs`). Every label
//! is bounded: a domain is a configured domain (else `_unknown`), a rule is a configured
//! rule id, an outcome is one of six words. **A client key or value is never a label**
//! (ratelimit's `detailed_metric` is accepted and adds nothing here, by design: see
//! config/README.md; the most denied keys are in the admin API instead).
//!
//! Besides Weir's own series: envoyproxy/ratelimit's hit counters under its Prometheus names
//! (`hits.rs`) and its service-level series (`service.rs`: calls, response time, errors,
//! global shadow mode, config loads), the same counts as statsd metrics under its statsd
//! names (`statsd.rs`), a latency histogram per API, `weir_build_info`, and the process
//! metrics (`process.rs`, from `/proc/self`).
//!
//! The decision path touches only pre-built counters ([`RuleCounters`], rebuilt with each
//! rule snapshot), the latency histograms (`histogram.rs`: no lock) and the request counters and
//! in-flight gauge (`sharded.rs`: a cache line a thread); store and cache counters kept by
//! `weir-resilience`, and the process metrics, are read when `/metrics` is scraped.
//! `history.rs` samples the per-rule counters once a second into a short per-second
//! history (the dashboard's chart). `weir proxy`'s upstream circuit breakers are read at
//! scrape time too (`upstreams.rs`). A front end's own dashboard panels (`panels.rs`) are
//! read when the dashboard asks.

mod decisions;
mod direct;
mod exposition;
mod histogram;
mod history;
mod hits;
mod panels;
mod process;
mod registry;
mod service;
mod sharded;
mod statsd;
mod upstreams;

pub use decisions::{DecisionOutcome, NearLimit, RuleCounters};
pub(crate) use direct::DirectCounters;
pub use direct::{DIRECT_DOMAIN, DIRECT_RULES};
pub use exposition::Exposition;
pub use history::{History, HistoryView, SeriesView, HISTORY_SECONDS, MAX_SERIES, OTHER_RULES};
pub use panels::Panel;
pub use registry::{Metrics, Section};
pub use sharded::InFlight;
pub(crate) use statsd::{client as statsd_client, flush as statsd_flush};
pub use statsd::{StatsdError, StatsdSettings};
pub use upstreams::{BreakerState, UpstreamBreakerView, UpstreamBreakers};
