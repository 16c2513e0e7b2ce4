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
//! The `path` value is the request path as backends read it ([`PathMatch::normalise`]:
//! empty and `.` segments dropped, `..` resolved, `%2e` read as `.`; by default also
//! `;params` cut, no trailing slash, lower case), bounded to the matcher's value limit by
//! [`weir_config::bounded_value`] (a long path keeps its head and a digest of the whole).
//! So `/x/./././…` padding counts as `/x`, `/LOGIN/` and `/login;a=1` count as `/login`, and
//! no path, however long, is left unlimited. A rule whose `path` value is not in that form
//! would never match: such rule files are refused at start and on reload. A path the
//! reading refuses never gets here (the screen answers it `400`); should one, or should
//! matching fail, the request is refused (fail closed), never let through unlimited.
//!
//! Unlike `weir serve` (Envoy's semantics: each descriptor on its own), the proxy checks a
//! request's limits all-or-nothing: a denied or queued request consumes nothing, so waiting
//! and trying again never charges twice. The decision is the server engine's own, in its
//! all-or-nothing mode ([`weir_engine::Engine::decide_all`]): shadow rules,
//! `enforce_percent`, metrics and a failing or full store are handled by the one path both
//! programs share.

use std::borrow::Cow;
use std::sync::Arc;

use http::request::Parts;
use weir_config::{Descriptor, RuleSet};
use weir_core::{Algorithm, Clock, FailurePolicy};
use weir_engine::{AllVerdict, DecideError, Engine};
use weir_tower::{
    Applied, BoxFuture, ClientIp, Evaluation, LimitError, Limits, OnLimit, PathMatch, PathRefusal,
};

use crate::classify::{classify, Class};
use crate::text::{StackText, IP_LEN};

/// The rules' domain the proxy reads.
pub const DOMAIN: &str = "proxy";

/// Limits from the rule files, over the server engine's limiter, rules and metrics.
#[derive(Debug)]
pub struct ProxyLimits {
    engine: Engine,
    classes: Arc<[Class]>,
    client_ip: ClientIp,
    on_limit: OnLimit,
    path_match: PathMatch,
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
    /// A `path` value no request's path descriptor can equal under the path reading.
    #[error("rule {rule}: path value '{value}' never matches: under --path-match {mode} the proxy's path descriptor is {normal} (see weir proxy --help, \"Paths\")")]
    PathValue {
        /// The rule's id.
        rule: String,
        /// The value as written.
        value: String,
        /// The reading in force (`exact` or `normalized`).
        mode: &'static str,
        /// What to write instead, or why no request has this path.
        normal: String,
    },
}

impl ProxyLimits {
    /// Limits for `engine`'s rules, with request `classes`, client addresses resolved by
    /// `client_ip`, and `on_limit` for every denial.
    pub fn new(
        engine: Engine,
        classes: Arc<[Class]>,
        client_ip: ClientIp,
        on_limit: OnLimit,
    ) -> Self {
        Self {
            engine,
            classes,
            client_ip,
            on_limit,
            path_match: PathMatch::default(),
        }
    }

    /// How request paths are read for the `path` descriptor ([`PathMatch::Normalized`]
    /// unless set).
    pub fn path_match(mut self, path_match: PathMatch) -> Self {
        self.path_match = path_match;
        self
    }

    /// Checks that a rule set suits the proxy, whose paths are read by `path_match`. The
    /// proxy's engine runs it at start-up and on every reload, so rules it cannot run are
    /// refused like a bad file (the old rules stay in force).
    pub fn check_rules(rules: &RuleSet, path_match: PathMatch) -> Result<(), ProxyRuleError> {
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
            for (_, value) in info.path.iter().filter(|(key, _)| key == "path") {
                if let Some(value) = value.as_deref().filter(|v| !path_match.can_match(v)) {
                    return Err(path_value_error(&info.id, value, path_match));
                }
            }
        }
        Ok(())
    }

    /// The descriptors of a request, or why its path has none (a spelling the path reading
    /// refuses), with `ip` its client's address as text (`None`: no peer address,
    /// `unknown`). On the stack: their strings borrow from the request, the classes and
    /// `ip` where they can (the class, an already normal path); only each descriptor's
    /// entries are a vector of their own (the engine's `Descriptor`).
    pub(crate) fn descriptors<'a>(
        &'a self,
        parts: &'a Parts,
        ip: Option<&'a StackText<IP_LEN>>,
    ) -> Result<[Descriptor<Cow<'a, str>>; 4], PathRefusal> {
        let class = Cow::Borrowed(classify(&self.classes, parts));
        let ip = Cow::Borrowed(ip.map_or("unknown", StackText::as_str));
        let path = match self.path_match.normalise(parts.uri.path())? {
            Cow::Borrowed(path) => weir_config::bounded_value(path),
            Cow::Owned(path) => Cow::Owned(weir_config::bounded_value(&path).into_owned()),
        };
        let descriptor = |entries: Vec<(Cow<'a, str>, Cow<'a, str>)>| Descriptor {
            entries,
            ..Descriptor::default()
        };
        let name = |s: &'static str| Cow::Borrowed(s);
        Ok([
            descriptor(vec![(name("class"), class.clone())]),
            descriptor(vec![
                (name("class"), class.clone()),
                (name("remote_address"), ip),
            ]),
            descriptor(vec![(name("class"), class), (name("path"), path)]),
            descriptor(vec![(name("global"), name("all"))]),
        ])
    }

    /// Decides a request on the engine's one decide path, all-or-nothing
    /// ([`weir_engine::Engine::decide_all`]): the same matching, shadow, roll-out, metrics
    /// and store-failure handling as `weir serve`. An error (a store that failed under a
    /// rule that does not fail open, a request that could not be matched) refuses the
    /// request: it never means "no limit".
    async fn decide(&self, parts: &Parts) -> Result<Evaluation, LimitError> {
        let ip = self.client_ip.of(parts).map(StackText::ip);
        let descriptors = self.request_descriptors(parts, ip.as_ref())?;
        let verdict = self.engine.decide_all(DOMAIN, &descriptors, 1).await;
        self.evaluation(verdict)
    }

    /// [`ProxyLimits::decide`] now, when the engine's store decides in place (the memory
    /// store: [`weir_engine::Engine::decide_all_now`]); `None` otherwise.
    fn decide_now(&self, parts: &Parts) -> Option<Result<Evaluation, LimitError>> {
        self.engine.store().memory()?;
        let ip = self.client_ip.of(parts).map(StackText::ip);
        let descriptors = match self.request_descriptors(parts, ip.as_ref()) {
            Ok(descriptors) => descriptors,
            Err(error) => return Some(Err(error)),
        };
        let verdict = self.engine.decide_all_now(DOMAIN, &descriptors, 1)?;
        Some(self.evaluation(verdict))
    }

    /// [`ProxyLimits::descriptors`], a refused path said as the limits' error.
    fn request_descriptors<'a>(
        &'a self,
        parts: &'a Parts,
        ip: Option<&'a StackText<IP_LEN>>,
    ) -> Result<[Descriptor<Cow<'a, str>>; 4], LimitError> {
        self.descriptors(parts, ip).map_err(|refusal| {
            tracing::warn!(%refusal, "proxy limits not decided (a path the screen let by): request refused");
            LimitError {
                reason: refusal.to_string(),
                on_failure: FailurePolicy::FailClosed,
            }
        })
    }

    /// The layer's evaluation of the engine's verdict; an error refuses the request.
    fn evaluation(
        &self,
        verdict: Result<AllVerdict, DecideError>,
    ) -> Result<Evaluation, LimitError> {
        let verdict = verdict.map_err(|error| {
            tracing::warn!(%error, "proxy limits not decided: request refused");
            LimitError {
                reason: error.to_string(),
                on_failure: FailurePolicy::FailClosed,
            }
        })?;
        let queue_key = verdict
            .denied_by
            .and_then(|i| verdict.limits.get(i))
            .map(|l| l.key.clone());
        Ok(Evaluation {
            allowed: verdict.allowed,
            applied: verdict
                .limits
                .into_iter()
                .map(|l| Applied {
                    name: l.rule_id,
                    window: l.window,
                    decision: l.decision,
                })
                .collect(),
            // A block list: waiting or degrading would not help.
            on_limit: if verdict.blocked {
                OnLimit::Reject
            } else {
                self.on_limit
            },
            queue_key: if verdict.blocked { None } else { queue_key },
        })
    }
}

/// Why a rule's `path` value never matches, and what to write instead.
fn path_value_error(rule: &str, value: &str, path_match: PathMatch) -> ProxyRuleError {
    let mode = match path_match {
        PathMatch::Exact => "exact",
        _ => "normalized",
    };
    // A prefix is read as the head of a path (`/API/*` as `/API/x`).
    let (path, prefix) = match value.strip_suffix('*') {
        Some(head) => (format!("{head}x"), true),
        None => (value.to_string(), false),
    };
    let normal = match path_match.normalise(&path) {
        Ok(normal) if prefix => format!("'{}*'", normal.strip_suffix('x').unwrap_or(&normal)),
        Ok(normal) => format!("'{normal}'"),
        Err(refusal) => format!("never this: such a path is refused ({refusal})"),
    };
    ProxyRuleError::PathValue {
        rule: rule.to_string(),
        value: value.to_string(),
        mode,
        normal,
    }
}

impl Limits for ProxyLimits {
    fn evaluate<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Result<Evaluation, LimitError>> {
        Box::pin(self.decide(request))
    }

    fn evaluate_now(&self, request: &Parts) -> Option<Result<Evaluation, LimitError>> {
        self.decide_now(request)
    }

    fn clock(&self) -> &dyn Clock {
        self.engine.limiter().clock()
    }
}
