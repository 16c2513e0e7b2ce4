//! Prometheus metrics of `weir serve`, served at `/metrics` (OpenMetrics text). Every label
//! is bounded: a domain is a configured domain (else `_unknown`), a rule is a configured
//! rule id, an outcome is one of six words. **A client key or value is never a label**
//! (ratelimit's `detailed_metric` is accepted and adds nothing here, by design: see
//! config/README.md; the most denied keys are in the admin API instead).
//!
//! The decision path touches only pre-built counters ([`RuleCounters`], rebuilt with each
//! rule snapshot) and the store latency histogram; store and cache counters kept by
//! `weir-resilience` are copied in when `/metrics` is scraped.

mod decisions;
mod registry;

pub use decisions::{NearLimit, Outcome, RuleCounters};
pub use registry::{InFlight, Metrics};
