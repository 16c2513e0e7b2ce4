//! What a request asks about ([`Descriptor`]) and what it is limited by ([`Matched`]). The
//! server builds descriptors from gRPC, JSON or HTTP input; [`RuleSet::matches`] answers
//! with one `Option<Matched>` per descriptor; the server then calls the limiter with each
//! match's key, rule and [`hits`](Matched::hits).
//!
//! [`RuleSet::matches`]: crate::RuleSet::matches

use std::sync::Arc;

use weir_core::{Key, Rule};

use crate::Unit;

/// One descriptor of a request: an ordered list of `(key, value)` entries that walks down the
/// rule tree of a domain, as in envoyproxy/ratelimit.
///
/// The strings are `String`s by default; a front end may borrow them from the request it
/// parsed (`Descriptor<Cow<str>>`, `Descriptor<&str>`): matching and key building take any
/// `S: AsRef<str>`, so a decision need not copy them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Descriptor<S = String> {
    /// The entries, outermost first: `[("remote_address", "10.0.0.1"), ("path", "/foo")]`.
    pub entries: Vec<(S, S)>,
    /// This descriptor's hits addend, overriding the request's (ratelimit's per-descriptor
    /// `hits_addend`). `None`: use the request's.
    pub hits_addend: Option<u64>,
    /// A limit sent by the caller instead of the configured one (Envoy's
    /// `RateLimitOverride`). When set, it applies whatever the rule tree says, as ratelimit
    /// does, provided the domain is known.
    pub limit: Option<LimitOverride>,
}

impl<S> Default for Descriptor<S> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            hits_addend: None,
            limit: None,
        }
    }
}

impl Descriptor {
    /// A descriptor from `(key, value)` pairs.
    ///
    /// ```
    /// use weir_config::Descriptor;
    /// let d = Descriptor::new([("database", "users")]);
    /// assert_eq!(d.entries, [("database".to_string(), "users".to_string())]);
    /// ```
    pub fn new<K, V>(entries: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        Self {
            entries: entries
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            hits_addend: None,
            limit: None,
        }
    }
}

impl<S> Descriptor<S> {
    /// Sets this descriptor's own hits addend.
    pub fn with_hits_addend(mut self, hits_addend: u64) -> Self {
        self.hits_addend = Some(hits_addend);
        self
    }

    /// Sets a limit override.
    pub fn with_limit(mut self, limit: LimitOverride) -> Self {
        self.limit = Some(limit);
        self
    }
}

/// A caller-supplied limit for one descriptor: `requests_per_unit` per `unit`, a fixed
/// window aligned to the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitOverride {
    /// Requests allowed per unit.
    pub requests_per_unit: u64,
    /// The unit.
    pub unit: Unit,
}

/// What a matched node does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limit {
    /// Check this rule.
    Rule(Rule),
    /// `unlimited: true`: always allowed, no store touched (ratelimit answers `OK` with
    /// `limit_remaining` = `u32::MAX`).
    Unlimited,
    /// `requests_per_unit: 0` (ratelimit's block-list idiom): every request is over the
    /// limit; `window` is the fixed window (aligned to the epoch) for `duration_until_reset`.
    Deny {
        /// The window length (`unit × unit_multiplier`).
        window: std::time::Duration,
    },
}

impl Limit {
    /// The limit with its rule named `name` (see `weir_core::Rule::named`): the rule's
    /// records are told apart by its place in the rule files, so a reload that changes its
    /// parameters keeps its keys' usage.
    pub(crate) fn named(self, name: &str) -> Self {
        match self {
            Self::Rule(rule) => Self::Rule(rule.named(name)),
            other => other,
        }
    }

    /// The rule, when there is one to check.
    pub fn rule(&self) -> Option<&Rule> {
        match self {
            Self::Rule(rule) => Some(rule),
            Self::Unlimited | Self::Deny { .. } => None,
        }
    }

    /// The name shown for the algorithm: the rule's (`fixed_window`, `gcra`, …),
    /// `unlimited` or `deny`.
    pub fn algorithm(&self) -> &'static str {
        match self {
            Self::Rule(rule) => rule.algorithm().name(),
            Self::Unlimited => "unlimited",
            Self::Deny { .. } => "deny",
        }
    }
}

/// A `rate_limit` block as written, for answering in ratelimit's terms (`current_limit`)
/// exactly rather than converting the window back into a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimitSpec {
    /// `requests_per_unit`.
    pub requests_per_unit: u64,
    /// `unit`.
    pub unit: Unit,
    /// `unit_multiplier` (1 when absent).
    pub unit_multiplier: u64,
}

/// The rule that applies to one descriptor of a request, and the key to count it under.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Matched {
    /// A stable label for metrics and logs, of bounded cardinality: ratelimit's stats key
    /// (`domain.key_value.key2`, from the *configuration*, never the request's values), or
    /// `domain.limit_override` for a caller's limit override. Equals
    /// [`RuleInfo::id`](crate::RuleInfo::id).
    pub rule_id: Arc<str>,
    /// The rule's `name`, if it has one (what `replaces` refers to).
    pub name: Option<Arc<str>>,
    /// What to do: check a rule, allow (unlimited) or deny (zero requests per unit).
    pub limit: Limit,
    /// The `rate_limit` block as written (ratelimit rules and limit overrides only).
    pub rate_limit: Option<RateLimitSpec>,
    /// The key to count under: the domain, then each entry's key and the request's value,
    /// escaped so that no two descriptors share a key; a key longer than
    /// [`Key::MAX_LEN`] keeps its head and replaces the rest with a SHA-256 digest (see
    /// `config/README.md`, "Keys").
    pub key: Key,
    /// The rule's cost multiplier (1 for ratelimit rules).
    pub cost: u64,
    /// The descriptor's own hits addend, if it had one.
    pub hits_addend: Option<u64>,
    /// Shadow mode: decide, count and report, but never deny.
    pub shadow: bool,
    /// The share of requests, 0 to 100, for which a denial is enforced (100 unless set).
    /// The server draws per request; a denial not enforced is reported like a shadow one.
    pub enforce_percent: u8,
    /// ratelimit's `detailed_metric`: the server may add the request's values to this
    /// rule's metric name (unbounded cardinality; the operator opted in).
    pub detailed_metric: bool,
    /// For a limit override: what the descriptor matches in the rule files without it (its
    /// rule, key, shadow and roll-out), `None` when nothing does. The override replaces
    /// the configured *limit*, as in envoyproxy/ratelimit, but never its guard: the
    /// server still denies the descriptor while the configured rule denies everything
    /// (`requests_per_unit: 0`) or its key is blocked or locked out under it, without
    /// charging the configured rule. Always `None` on a configured match.
    pub configured: Option<Box<Matched>>,
    /// ratelimit's `quota_mode` (on the rule's node; never on a limit override): the
    /// descriptor is still checked, charged and reported (`OVER_LIMIT` when denied), but the
    /// request as a whole is over the limit only if a descriptor *without* quota mode is,
    /// or if *every* quota-mode descriptor of the request is. An unlimited rule counts as
    /// no quota. The server applies it ([`RuleSet::matches`] only carries it).
    ///
    /// [`RuleSet::matches`]: crate::RuleSet::matches
    pub quota_mode: bool,
}

/// The name every limit override's rule carries, whatever limit it names: one request
/// asking another limit on the same key is a rule change on one record, not a fresh
/// bucket. Its records' scope is [`Rule::named_scope`] of it
/// ([`limit_override_scope`]).
pub const LIMIT_OVERRIDE_RULE: &str = "weir-config/limit_override";

/// The scope of every limit override's records, whatever limit a request names: a memory
/// store gives it a small share of its own (`weir_core::MemoryStoreBuilder::scope_share`), so a
/// stream of overrides can never fill the store.
///
/// ```
/// use weir_config::{limit_override_scope, Descriptor, LimitOverride, RuleSet, Unit};
/// let rules = RuleSet::parse("t.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n")?;
/// let limit = LimitOverride { requests_per_unit: 1, unit: Unit::Year };
/// let m = rules.matches("d", &[Descriptor::new([("k", "v")]).with_limit(limit)])?.remove(0).unwrap();
/// assert_eq!(m.rule().unwrap().scope(), limit_override_scope());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn limit_override_scope() -> u64 {
    Rule::named_scope(LIMIT_OVERRIDE_RULE)
}

impl Matched {
    /// The rule to check, if any (none when unlimited or denying everything).
    pub fn rule(&self) -> Option<&Rule> {
        self.limit.rule()
    }

    /// Whether the rule is `unlimited`.
    pub fn is_unlimited(&self) -> bool {
        matches!(self.limit, Limit::Unlimited)
    }

    /// The units this descriptor charges: its own hits addend if it has one (even 0, a
    /// check that charges nothing), else the request's (`0` counts as 1, as in ratelimit),
    /// times the rule's cost; saturating.
    ///
    /// ```
    /// # use weir_config::{Descriptor, RuleSet};
    /// let rules = RuleSet::parse("t.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 5}\n")?;
    /// let m = rules.matches("d", &[Descriptor::new([("k", "v")])])?.remove(0).unwrap();
    /// assert_eq!(m.hits(0), 1);
    /// assert_eq!(m.hits(3), 3);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn hits(&self, request_hits_addend: u64) -> u64 {
        self.hits_addend
            .unwrap_or(request_hits_addend.max(1))
            .saturating_mul(self.cost)
    }
}
