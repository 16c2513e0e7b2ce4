//! The shape of a rule file as written, before validation: every field optional and every
//! scalar or block [`Spanned`] (for its line; `yaml.rs` relies on *every* field but the
//! `descriptors` and `replaces` lists and `metadata` being spanned when it rebuilds error
//! paths). Unknown fields are refused here (by serde)
//! and duplicate keys by the YAML library; `compile.rs` turns this into rules. Nothing here
//! decides anything.

use serde::Deserialize;
use serde_saphyr::Spanned;

/// A whole file: one domain.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFile {
    pub(crate) domain: Option<Spanned<String>>,
    #[serde(default)]
    pub(crate) descriptors: Option<Vec<Spanned<RawDescriptor>>>,
}

/// One node of the descriptor tree.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDescriptor {
    pub(crate) key: Option<Spanned<String>>,
    pub(crate) value: Option<Spanned<String>>,
    pub(crate) rate_limit: Option<Spanned<RawRateLimit>>,
    pub(crate) rule: Option<Spanned<RawRule>>,
    pub(crate) shadow_mode: Option<Spanned<bool>>,
    pub(crate) quota_mode: Option<Spanned<bool>>,
    pub(crate) detailed_metric: Option<Spanned<bool>>,
    /// ratelimit's `value_to_metric`: names its statistics only; Weir's metrics never take
    /// a client's value, so it is read (type-checked) and changes nothing.
    #[expect(
        dead_code,
        reason = "read for its type; ratelimit uses it for stats names only"
    )]
    pub(crate) value_to_metric: Option<Spanned<bool>>,
    /// ratelimit's `share_threshold`: one counter for every value a wildcard matches.
    pub(crate) share_threshold: Option<Spanned<bool>>,
    /// ratelimit's `metadata`: any YAML, returned to Envoy by ratelimit as response
    /// metadata and never used for limiting; read and ignored.
    #[expect(
        dead_code,
        reason = "accepted and ignored, as ratelimit ignores it for limiting"
    )]
    pub(crate) metadata: Option<serde::de::IgnoredAny>,
    pub(crate) descriptors: Option<Vec<Spanned<RawDescriptor>>>,
}

/// envoyproxy/ratelimit's `rate_limit` block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRateLimit {
    pub(crate) unit: Option<Spanned<String>>,
    pub(crate) requests_per_unit: Option<Spanned<i64>>,
    pub(crate) unit_multiplier: Option<Spanned<i64>>,
    pub(crate) unlimited: Option<Spanned<bool>>,
    pub(crate) name: Option<Spanned<String>>,
    pub(crate) replaces: Option<Vec<Spanned<RawReplace>>>,
}

/// One `replaces` entry: `{name: …}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReplace {
    pub(crate) name: Option<Spanned<String>>,
}

/// Weir's `rule` block. Which numeric and duration fields are required depends on the
/// algorithm; `compile.rs` refuses the ones that do not apply.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRule {
    pub(crate) algorithm: Option<Spanned<String>>,
    pub(crate) unlimited: Option<Spanned<bool>>,
    pub(crate) limit: Option<Spanned<i64>>,
    pub(crate) rate: Option<Spanned<i64>>,
    pub(crate) per: Option<Spanned<String>>,
    pub(crate) burst: Option<Spanned<i64>>,
    pub(crate) window: Option<Spanned<String>>,
    pub(crate) precision: Option<Spanned<String>>,
    pub(crate) capacity: Option<Spanned<i64>>,
    pub(crate) initial_tokens: Option<Spanned<i64>>,
    pub(crate) max_depth: Option<Spanned<i64>>,
    pub(crate) max_wait: Option<Spanned<String>>,
    pub(crate) max_leases: Option<Spanned<i64>>,
    pub(crate) warmup: Option<Spanned<String>>,
    pub(crate) cold_factor: Option<Spanned<i64>>,
    pub(crate) cost: Option<Spanned<i64>>,
    pub(crate) lockout: Option<Spanned<RawLockout>>,
    pub(crate) on_failure: Option<Spanned<String>>,
    pub(crate) mode: Option<Spanned<String>>,
    pub(crate) shadow: Option<Spanned<bool>>,
    pub(crate) enforce_percent: Option<Spanned<i64>>,
    pub(crate) name: Option<Spanned<String>>,
    pub(crate) replaces: Option<Vec<Spanned<RawReplace>>>,
}

/// A rule's `lockout` block.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLockout {
    pub(crate) duration: Option<Spanned<String>>,
    pub(crate) max: Option<Spanned<String>>,
    pub(crate) forgive_after: Option<Spanned<String>>,
}
