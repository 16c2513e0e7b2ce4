//! The proxy's limits: each request becomes descriptors, the rule files (domain `proxy`,
//! Weir's YAML, reloaded like `weir serve`'s) say which limits apply, and the limiter
//! checks them all at once. This is the [`Limits`] the proxy's `RateLimitLayer` asks.
//!
//! The descriptors of one request, all under its class (`reader` unless a class matched):
//!
//! | descriptor | a rule on it limits |
//! |---|---|
//! | `[class]` | the whole class together (e.g. all crawlers) |
//! | `[class, remote_address]` | each client IP of the class |
//! | `[class, path]` | each path of the class |
//! | `[global]` (value `all`) | every request, whatever its class |
//!
//! The `path` value is the request path as a backend reads it ([`normalise_path`]: empty
//! and `.` segments dropped, `..` resolved, `%2e` read as `.`), bounded to the matcher's
//! value limit by [`weir_config::bounded_value`] (a long path keeps its head and a digest of
//! the whole). So `/x/./././…` padding counts as `/x`, and no path, however long, is left
//! unlimited. Should matching still fail, the request is refused (fail closed), never let
//! through unlimited.
//!
//! Unlike `weir serve` (Envoy's semantics: each descriptor on its own), the proxy checks a
//! request's limits all-or-nothing: a denied or queued request consumes nothing, so waiting
//! and trying again never charges twice. Shadow rules and `enforce_percent` work as in
//! `weir serve`, and the decisions are counted in the same metrics.

use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use weir_config::{Descriptor, Limit, Matched, RuleSet};
use weir_core::{Algorithm, Clock, FailurePolicy, Key, Rule};
use weir_server::{deny_all, enforced, App, Outcome};
use weir_tower::{
    normalise_path, Applied, BoxFuture, ClientIp, Evaluation, LimitError, Limits, OnLimit,
};

use crate::classify::{classify, Class};

/// The rules' domain the proxy reads.
pub const DOMAIN: &str = "proxy";

/// Limits from the rule files, over the server engine's limiter, rules and metrics.
#[derive(Debug)]
pub struct ProxyLimits {
    app: App,
    classes: Arc<[Class]>,
    client_ip: ClientIp,
    on_limit: OnLimit,
}

/// A rule the proxy cannot run, found when the rules are checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyRuleError {
    /// No `proxy` domain in the rule files.
    #[error("the rule files define no domain '{DOMAIN}' (the proxy's rules live there; see config/proxy.yaml)")]
    NoDomain,
    /// A concurrency rule: the proxy's in-flight limit is `--max-in-flight`.
    #[error("rule {0}: concurrency rules are not for the proxy; use --max-in-flight for the backend's concurrency")]
    Concurrency(String),
    /// A cost other than 1: the proxy charges one unit per request.
    #[error(
        "rule {0}: the proxy charges one unit per request; a cost other than 1 is not supported"
    )]
    Cost(String),
}

impl ProxyLimits {
    /// Limits for `app`'s rules, with request `classes`, client addresses resolved by
    /// `client_ip`, and `on_limit` for every denial.
    pub fn new(app: App, classes: Arc<[Class]>, client_ip: ClientIp, on_limit: OnLimit) -> Self {
        Self {
            app,
            classes,
            client_ip,
            on_limit,
        }
    }

    /// Checks that a rule set suits the proxy. The proxy's engine runs it at start-up and
    /// on every reload, so rules it cannot run are refused like a bad file (the old rules
    /// stay in force).
    pub fn check_rules(rules: &RuleSet) -> Result<(), ProxyRuleError> {
        if !rules.domains().any(|d| d == DOMAIN) {
            return Err(ProxyRuleError::NoDomain);
        }
        for info in rules.rules().iter().filter(|r| r.domain.as_ref() == DOMAIN) {
            let concurrency = info
                .rule()
                .is_some_and(|r| matches!(r.algorithm(), Algorithm::Concurrency(_)));
            if concurrency {
                return Err(ProxyRuleError::Concurrency(info.id.to_string()));
            }
            if info.cost != 1 {
                return Err(ProxyRuleError::Cost(info.id.to_string()));
            }
        }
        Ok(())
    }

    /// The descriptors of a request.
    pub fn descriptors(&self, parts: &Parts) -> Vec<Descriptor> {
        let class = classify(&self.classes, parts);
        let ip = self
            .client_ip
            .of(parts)
            .map_or_else(|| "unknown".to_string(), |ip| ip.to_string());
        vec![
            Descriptor::new([("class", class)]),
            Descriptor::new([("class", class), ("remote_address", ip.as_str())]),
            Descriptor::new([
                ("class", class),
                (
                    "path",
                    &*weir_config::bounded_value(&normalise_path(parts.uri.path())),
                ),
            ]),
            Descriptor::new([("global", "all")]),
        ]
    }

    async fn decide(&self, parts: &Parts) -> Result<Evaluation, LimitError> {
        let snapshot = self.app.rule_book().snapshot();
        let descriptors = self.descriptors(parts);
        let matched: Vec<Matched> = match snapshot.rules.matches(DOMAIN, &descriptors) {
            Ok(matched) => matched.into_iter().flatten().collect(),
            // Descriptors are bounded and the domain is checked at start-up and on every
            // reload (`check_rules`), so this should not happen; if it does, the request is
            // refused: an error here must never mean "no limit".
            Err(error) => {
                tracing::warn!(%error, "proxy descriptors not matched: request refused");
                return Err(LimitError {
                    reason: format!("the request could not be matched to its limits: {error}"),
                    on_failure: FailurePolicy::FailClosed,
                });
            }
        };
        let checked: Vec<(&Matched, Rule)> = matched
            .iter()
            .filter_map(|m| match m.limit {
                Limit::Rule(rule) => Some((m, rule)),
                _ => None,
            })
            .collect();
        if let Some(m) = matched
            .iter()
            .find(|m| matches!(m.limit, Limit::Deny { .. }))
        {
            return Ok(self.deny_all(m));
        }
        if checked.is_empty() {
            return Ok(Evaluation::unlimited());
        }
        let limits: Vec<(Key, Rule)> = checked.iter().map(|(m, r)| (m.key.clone(), *r)).collect();
        let mut decisions = self.check_all(&limits, &checked).await?;
        let global_shadow = self.app.engine().global_shadow();
        let enforced_denial = |i: usize| {
            let m = checked.get(i).map(|(m, _)| *m);
            m.is_some_and(|m| !m.shadow && enforced(&m.key, m.enforce_percent) && !global_shadow)
        };
        let denied: Vec<usize> = (0..decisions.each.len())
            .filter(|&i| decisions.each.get(i).is_some_and(|d| !d.allowed))
            .collect();
        let first_enforced = denied.iter().copied().find(|&i| enforced_denial(i));
        if !denied.is_empty() && first_enforced.is_none() {
            // Only shadow denials: report them, and charge the limits that allowed, as if
            // the shadow rules were not there.
            let allowing: Vec<(Key, Rule)> = limits
                .iter()
                .enumerate()
                .filter(|(i, _)| !denied.contains(i))
                .map(|(_, l)| l.clone())
                .collect();
            if !allowing.is_empty() {
                let charged = self.check_all(&allowing, &checked).await?;
                let mut fresh = charged.each.into_iter();
                for (i, d) in decisions.each.iter_mut().enumerate() {
                    if !denied.contains(&i) {
                        if let Some(f) = fresh.next() {
                            *d = f;
                        }
                    }
                }
            }
        }
        let counters = &snapshot.counters;
        for (i, ((m, _), d)) in checked.iter().zip(&decisions.each).enumerate() {
            let shadow_denied = !d.allowed && !enforced_denial(i);
            counters.matched(DOMAIN, &m.rule_id, Outcome::of(Some(d), shadow_denied));
            if !d.allowed {
                self.app.engine().top_denied().record(&m.key, &m.rule_id);
            }
        }
        let applied = checked
            .iter()
            .zip(&decisions.each)
            .map(|((m, rule), d)| Applied {
                name: Arc::clone(&m.rule_id),
                window: rule.window(),
                decision: *d,
            })
            .collect();
        Ok(Evaluation {
            allowed: first_enforced.is_none(),
            applied,
            on_limit: self.on_limit,
            queue_key: first_enforced
                .and_then(|i| limits.get(i))
                .map(|(k, _)| k.clone()),
        })
    }

    async fn check_all(
        &self,
        limits: &[(Key, Rule)],
        checked: &[(&Matched, Rule)],
    ) -> Result<weir_core::Decisions, LimitError> {
        let limiter = self.app.engine().limiter();
        let clock = limiter.clock();
        let start_ns = clock.now_ns();
        let result = match limiter.store().memory() {
            // The memory store decides at once, at this instant, on the records of each
            // (rule, key) as the limiter would (the admin API reaches the same ones).
            Some(memory) => memory.check_all_scoped_now(limits, 1, start_ns),
            // A network store's future is large: boxed, so that this future (moved into a
            // box on every request) stays small.
            None => Box::pin(limiter.check_all(limits, 1)).await,
        };
        self.app.metrics().store_call(Duration::from_nanos(
            clock.now_ns().saturating_sub(start_ns),
        ));
        result.map_err(|error| {
            let policies = checked.iter().map(|(_, r)| r.failure_policy());
            let on_failure = if policies.clone().any(|p| p == FailurePolicy::FailClosed) {
                FailurePolicy::FailClosed
            } else if policies.clone().all(|p| p == FailurePolicy::FailOpen) {
                FailurePolicy::FailOpen
            } else {
                FailurePolicy::LocalFallback
            };
            LimitError {
                reason: error.to_string(),
                on_failure,
            }
        })
    }

    /// A `requests_per_unit: 0` rule: denied until its window ends.
    fn deny_all(&self, m: &Matched) -> Evaluation {
        let window = match m.limit {
            Limit::Deny { window } => window,
            _ => Duration::from_secs(1),
        };
        let now_ns = self.app.engine().limiter().clock().now_ns();
        Evaluation {
            allowed: false,
            applied: vec![Applied {
                name: Arc::clone(&m.rule_id),
                window,
                decision: deny_all(window, now_ns),
            }],
            // A block list: waiting or degrading would not help.
            on_limit: OnLimit::Reject,
            queue_key: None,
        }
    }
}

impl Limits for ProxyLimits {
    fn evaluate<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Result<Evaluation, LimitError>> {
        Box::pin(self.decide(request))
    }

    fn clock(&self) -> &dyn Clock {
        self.app.engine().limiter().clock()
    }
}
