//! [`Limits`]: the question the layer asks of every request — which limits apply, and do
//! they all allow it? — and [`Policies`], the answer from policies given in code over a
//! [`Limiter`]. `weir proxy` answers it from YAML rule files instead (through the server's
//! engine), and the layer does not know the difference.
//!
//! The limits of one request are checked together, all-or-nothing (`check_all`): nothing is
//! consumed unless every one allows, so a request that waits in a queue and is checked again
//! is never charged twice.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::request::Parts;
use weir_core::{CheckError, Clock, FailurePolicy, Key, Limiter, Paced, Store};
use weir_names::Applied;

use crate::extractor::KeyExtractor;
use crate::policy::{OnLimit, Policy, PolicyError};

/// A boxed future, as the [`Limits`] trait returns them.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The answer for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evaluation {
    /// Whether the request may go: every limit allowed (or the denials are not enforced).
    pub allowed: bool,
    /// Every limit that applied, in order; empty when none did.
    pub applied: Vec<Applied>,
    /// When denied: what to do (the first enforced denial's choice).
    pub on_limit: OnLimit,
    /// When denied: the key the request waits under, for the per-key queue bound.
    pub queue_key: Option<Key>,
}

impl Evaluation {
    /// No limit applied: the request goes.
    pub fn unlimited() -> Self {
        Self {
            allowed: true,
            applied: Vec::new(),
            on_limit: OnLimit::Reject,
            queue_key: None,
        }
    }

    /// The longest `retry_after` of the denials (zero when allowed).
    pub fn retry_after(&self) -> Duration {
        self.applied
            .iter()
            .filter(|a| !a.decision.allowed)
            .map(|a| a.decision.retry_after)
            .max()
            .unwrap_or_default()
    }

    /// The longest `delay` (the leaky-bucket queue's pacing) of the allowed request.
    pub fn delay(&self) -> Duration {
        self.applied
            .iter()
            .map(|a| a.decision.delay)
            .max()
            .unwrap_or_default()
    }
}

/// What the queue's wait reads of an answer (`weir_core::Wait`): allowed, the longest delay,
/// the longest `retry_after`, as for one decision.
impl Paced for Evaluation {
    fn allowed(&self) -> bool {
        self.allowed
    }
    fn delay(&self) -> Duration {
        Evaluation::delay(self)
    }
    fn retry_after(&self) -> Duration {
        Evaluation::retry_after(self)
    }
}

/// A request the limits could not decide.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{reason}")]
pub struct LimitError {
    /// Why.
    pub reason: String,
    /// What the rules say to do about it: [`FailurePolicy::FailOpen`] lets the request
    /// through; anything else answers `503`. (A local fallback is the store's job: wrap it
    /// in `weir_resilience::FailoverStore`, which absorbs failures before they get here.)
    pub on_failure: FailurePolicy,
}

/// The limits of a layer: which apply to a request and whether they allow it.
pub trait Limits: Send + Sync + 'static {
    /// Decides `request` (consuming from every limit only if all allow).
    fn evaluate<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Result<Evaluation, LimitError>>;

    /// [`Limits::evaluate`] decided now, without a future, when these limits can (their
    /// store decides in place); `None` (the default) when the answer must be awaited. The
    /// layer asks this first: a request is decided once, by one or the other.
    fn evaluate_now(&self, request: &Parts) -> Option<Result<Evaluation, LimitError>> {
        let _ = request;
        None
    }

    /// The clock queued requests wait on (the limiter's, so tests drive it by hand).
    fn clock(&self) -> &dyn Clock;
}

/// Policies given in code, decided by a [`Limiter`].
#[derive(Debug)]
pub struct Policies<S: Store, C: Clock> {
    limiter: Limiter<S, C>,
    policies: Vec<Policy>,
}

impl<S: Store, C: Clock> Policies<S, C> {
    /// `policies` over `limiter`. Names must differ: a policy's name is the namespace of
    /// its keys.
    pub fn new(limiter: Limiter<S, C>, policies: Vec<Policy>) -> Result<Self, PolicyError> {
        let mut names = std::collections::HashSet::new();
        for policy in &policies {
            if !names.insert(policy.name()) {
                return Err(PolicyError::DuplicateName(policy.name().to_string()));
            }
        }
        Ok(Self { limiter, policies })
    }

    /// The limiter (to reward, reset or inspect keys from a handler).
    pub fn limiter(&self) -> &Limiter<S, C> {
        &self.limiter
    }

    /// The store key `policy` counts `request` under, if it applies and has a key (`None`
    /// also when the key cannot be built: the layer refuses such a request).
    pub fn key_of(policy: &Policy, request: &Parts) -> Option<Key> {
        if !policy.applies(request) {
            return None;
        }
        let parts = policy.key.extract(request).ok()??;
        Some(weir_names::descriptor_key(&policy.name, parts.entries()))
    }

    async fn decide(&self, request: &Parts) -> Result<Evaluation, LimitError> {
        let mut matched: Vec<&Policy> = Vec::new();
        let mut limits: Vec<(Key, weir_core::Rule)> = Vec::new();
        for policy in &self.policies {
            if !policy.applies(request) {
                continue;
            }
            // A key that cannot be built (e.g. no peer address: the server's
            // misconfiguration) is never "no limit": fail closed, saying why.
            let parts = policy.key.extract(request).map_err(|error| LimitError {
                reason: format!("policy {} could not key the request: {error}", policy.name),
                on_failure: FailurePolicy::FailClosed,
            })?;
            if let Some(parts) = parts {
                matched.push(policy);
                limits.push((
                    weir_names::descriptor_key(&policy.name, parts.entries()),
                    policy.rule,
                ));
            }
        }
        if limits.is_empty() {
            return Ok(Evaluation::unlimited());
        }
        let decisions = self
            .limiter
            .check_all(&limits, 1)
            .await
            .map_err(|error| failure(&matched, &error))?;
        let denied = decisions.each.iter().position(|d| !d.allowed);
        Ok(Evaluation {
            allowed: decisions.allowed,
            applied: matched
                .iter()
                .zip(&decisions.each)
                .map(|(policy, decision)| Applied {
                    name: Arc::clone(&policy.name),
                    window: policy.rule.window(),
                    decision: *decision,
                })
                .collect(),
            on_limit: denied
                .and_then(|i| matched.get(i))
                .map_or(OnLimit::Reject, |p| p.on_limit),
            queue_key: denied
                .and_then(|i| limits.get(i))
                .map(|(key, _)| key.clone()),
        })
    }
}

/// A failure of the limiter, with the strictest failure policy of the limits involved
/// (fail closed beats the rest: one rule that must not fail open keeps the request out).
fn failure(matched: &[&Policy], error: &CheckError) -> LimitError {
    LimitError {
        reason: error.to_string(),
        on_failure: FailurePolicy::strictest(matched.iter().map(|p| p.rule.failure_policy())),
    }
}

impl<S: Store, C: Clock> Limits for Policies<S, C> {
    fn evaluate<'a>(&'a self, request: &'a Parts) -> BoxFuture<'a, Result<Evaluation, LimitError>> {
        Box::pin(self.decide(request))
    }

    fn clock(&self) -> &dyn Clock {
        self.limiter.clock()
    }
}
