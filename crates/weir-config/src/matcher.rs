//! [`RuleSet::matches`]: a request's `(domain, descriptors)` → one `Option<Matched>` per
//! descriptor. Checks the request [limits](crate::bounds) first, then walks each descriptor
//! down its domain's tree (`tree.rs`), applies `replaces` across the request, and builds each
//! match's key (`weir_names`). A limit override gets its own rule and key space, and
//! carries the configured match it stands in for ([`Matched::configured`]), whose guard the
//! server still honours. Decides nothing about allowing: that is the limiter's job.

use std::collections::HashSet;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::bounds::{
    MAX_DESCRIPTORS, MAX_DOMAIN_LEN, MAX_ENTRIES, MAX_HITS_ADDEND, MAX_KEY_LEN, MAX_VALUE_LEN,
};
use crate::error::MatchError;
use crate::info::RuleInfo;
use crate::request::{
    Descriptor, Limit, LimitOverride, Matched, RateLimitSpec, LIMIT_OVERRIDE_RULE,
};
use crate::ruleset::RuleSet;

impl RuleSet {
    /// Matches a request's descriptors against `domain`'s rules: one entry per descriptor,
    /// `None` when no rule applies (the descriptor is allowed, `OK` without a limit).
    ///
    /// - The request [limits](crate::bounds) are checked first; then the domain must exist
    ///   ([`MatchError::UnknownDomain`] otherwise, which a server answers as ratelimit
    ///   does: `OK`, nothing limited; limit overrides are not applied either).
    /// - A descriptor with a [limit override](Descriptor::limit) gets that limit, counted in
    ///   a key space of its own; the rule it matches without the override is carried in
    ///   [`Matched::configured`] (its block, lockout or deny still holds; it takes no part
    ///   in `replaces`, but is dropped when another descriptor's rule replaces it).
    /// - Otherwise its entries walk down the tree in order. At each level an exact
    ///   `key`+`value` node beats a prefix node (`value: foo*`, the first in file order),
    ///   which beats a key-only node. The rule applies only if the walk consumes every entry
    ///   and ends on a node with a rule; a partial match applies nothing. A `*` in a value
    ///   stands for any run of bytes (`bar*b`, `foo*bar*baz`), exactly as ratelimit matches.
    /// - An entry matched by a wildcard with `share_threshold: true` counts under the
    ///   wildcard's pattern: every value it matches shares one counter (ratelimit's cache key).
    /// - A matched rule whose `name` appears in the `replaces` of another matched rule of the
    ///   same request is dropped (`None`).
    ///
    /// ```
    /// use weir_config::{Descriptor, RuleSet};
    /// let rules = RuleSet::parse("messaging.yaml", r#"
    /// domain: messaging
    /// descriptors:
    ///   - key: message_type
    ///     value: marketing
    ///     descriptors:
    ///       - key: to_number
    ///         rate_limit: {unit: day, requests_per_unit: 5}
    ///   - key: to_number
    ///     rate_limit: {unit: day, requests_per_unit: 100}
    /// "#)?;
    /// let matched = rules.matches("messaging", &[
    ///     Descriptor::new([("message_type", "marketing"), ("to_number", "2061111111")]),
    ///     Descriptor::new([("to_number", "2061111111")]),
    ///     Descriptor::new([("message_type", "marketing")]),
    /// ])?;
    /// assert_eq!(matched[0].as_ref().unwrap().rule().unwrap().limit(), 5);
    /// assert_eq!(matched[1].as_ref().unwrap().rule().unwrap().limit(), 100);
    /// assert!(matched[2].is_none(), "a node without a rate_limit limits nothing");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn matches<S: AsRef<str>>(
        &self,
        domain: &str,
        descriptors: &[Descriptor<S>],
    ) -> Result<Vec<Option<Matched>>, MatchError> {
        check(domain, descriptors)?;
        let (tree, rules) = self
            .domain(domain)
            .map(|(d, rules)| (&d.tree, rules))
            .ok_or_else(|| MatchError::UnknownDomain(domain.to_string()))?;
        // Inline for a request's few descriptors: no allocation of its own.
        let mut infos: SmallVec<[Option<&RuleInfo>; 8]> =
            SmallVec::with_capacity(descriptors.len());
        let mut matched = Vec::with_capacity(descriptors.len());
        for descriptor in descriptors {
            let found = tree.lookup(&descriptor.entries);
            let info = found.as_ref().and_then(|found| rules.get(found.rule));
            let shared = found
                .as_ref()
                .map(|f| f.shared.as_slice())
                .unwrap_or_default();
            if let Some(limit) = descriptor.limit {
                infos.push(None);
                let configured =
                    info.map(|info| Box::new(configured(domain, descriptor, info, shared)));
                matched.push(Some(overridden(domain, descriptor, limit, configured)));
                continue;
            }
            infos.push(info);
            matched.push(info.map(|info| configured(domain, descriptor, info, shared)));
        }
        // Most rules replace nothing: no set to make (its hasher's seed is a thread-local
        // read and write) unless one does.
        if infos.iter().flatten().any(|info| !info.replaces.is_empty()) {
            let replaced: HashSet<&str> = infos
                .iter()
                .flatten()
                .flat_map(|info| info.replaces.iter().map(|name| name.as_ref()))
                .collect();
            let is_replaced = |m: &Matched| {
                m.name
                    .as_deref()
                    .is_some_and(|name| replaced.contains(name))
            };
            for slot in &mut matched {
                if slot.as_ref().is_some_and(is_replaced) {
                    *slot = None;
                } else if let Some(m) = slot {
                    if m.configured.as_deref().is_some_and(is_replaced) {
                        m.configured = None;
                    }
                }
            }
        }
        Ok(matched)
    }
}

/// The configured rule `info` matched by `descriptor`.
fn configured<S: AsRef<str>>(
    domain: &str,
    descriptor: &Descriptor<S>,
    info: &RuleInfo,
    shared: &[(usize, String)],
) -> Matched {
    Matched {
        rule_id: Arc::clone(&info.id),
        name: info.name.clone(),
        limit: info.limit,
        rate_limit: info.rate_limit,
        key: key(domain, &descriptor.entries, shared),
        cost: info.cost,
        hits_addend: descriptor.hits_addend,
        shadow: info.shadow,
        enforce_percent: info.enforce_percent,
        detailed_metric: info.detailed_metric,
        configured: None,
        quota_mode: info.quota_mode,
    }
}

/// A match's key: the request's entries, except that an entry matched by a wildcard node
/// with `share_threshold` counts under the node's pattern (`files/*`), as ratelimit builds
/// its cache key: every value that wildcard matches shares one counter.
fn key<S: AsRef<str>>(
    domain: &str,
    entries: &[(S, S)],
    shared: &[(usize, String)],
) -> weir_core::Key {
    if shared.is_empty() {
        return weir_names::descriptor_key(domain, entries);
    }
    let entries: Vec<(&str, &str)> = entries
        .iter()
        .enumerate()
        .map(|(i, (k, v))| {
            let value = shared
                .iter()
                .find(|(at, _)| *at == i)
                .map_or(v.as_ref(), |(_, pattern)| pattern.as_str());
            (k.as_ref(), value)
        })
        .collect();
    weir_names::descriptor_key(domain, &entries)
}

/// A caller's limit override: a fixed window of one unit (0 requests: deny), as ratelimit,
/// counted in a key space of its own ([`weir_names::override_key`]): a request's override can
/// never share, reset or switch the algorithm of a configured rule's record (alternating
/// overrides with failed logins used to wipe the login lockout). `configured` is what the
/// descriptor matches without it, whose guard still holds (issue 26: an override used to
/// answer `200` for a locked-out account or a blocked address).
fn overridden<S: AsRef<str>>(
    domain: &str,
    descriptor: &Descriptor<S>,
    limit: LimitOverride,
    configured: Option<Box<Matched>>,
) -> Matched {
    let window = limit.unit.times(1);
    // One name for every override: a request asking another limit on the same key is a
    // rule change on one record (as ratelimit keys it), not a fresh bucket; and one scope,
    // which a memory store bounds with a share of its own (`limit_override_scope`).
    let rule = weir_core::Rule::fixed_window(limit.requests_per_unit, window)
        .map(|rule| rule.named(LIMIT_OVERRIDE_RULE));
    Matched {
        rule_id: Arc::from(format!("{domain}.limit_override")),
        name: None,
        limit: rule.map_or(Limit::Deny { window }, Limit::Rule),
        rate_limit: Some(RateLimitSpec {
            requests_per_unit: limit.requests_per_unit,
            unit: limit.unit,
            unit_multiplier: 1,
        }),
        key: weir_names::override_key(domain, &descriptor.entries),
        cost: 1,
        hits_addend: descriptor.hits_addend,
        shadow: false,
        enforce_percent: 100,
        detailed_metric: false,
        configured,
        quota_mode: false,
    }
}

/// The request limits, checked before any lookup.
fn check<S: AsRef<str>>(domain: &str, descriptors: &[Descriptor<S>]) -> Result<(), MatchError> {
    if domain.is_empty() {
        return Err(MatchError::EmptyDomain);
    }
    if domain.len() > MAX_DOMAIN_LEN {
        return Err(MatchError::DomainTooLong {
            len: domain.len(),
            max: MAX_DOMAIN_LEN,
        });
    }
    if descriptors.is_empty() {
        return Err(MatchError::NoDescriptors);
    }
    if descriptors.len() > MAX_DESCRIPTORS {
        return Err(MatchError::TooManyDescriptors {
            count: descriptors.len(),
            max: MAX_DESCRIPTORS,
        });
    }
    for (d, descriptor) in descriptors.iter().enumerate() {
        if descriptor.entries.len() > MAX_ENTRIES {
            return Err(MatchError::TooManyEntries {
                descriptor: d,
                count: descriptor.entries.len(),
                max: MAX_ENTRIES,
            });
        }
        for (e, (key, value)) in descriptor.entries.iter().enumerate() {
            let (key, value) = (key.as_ref(), value.as_ref());
            if key.len() > MAX_KEY_LEN {
                return Err(MatchError::KeyTooLong {
                    descriptor: d,
                    entry: e,
                    len: key.len(),
                    max: MAX_KEY_LEN,
                });
            }
            if value.len() > MAX_VALUE_LEN {
                return Err(MatchError::ValueTooLong {
                    descriptor: d,
                    entry: e,
                    len: value.len(),
                    max: MAX_VALUE_LEN,
                });
            }
        }
        if let Some(hits) = descriptor.hits_addend.filter(|h| *h > MAX_HITS_ADDEND) {
            return Err(MatchError::HitsAddendTooLarge {
                place: format!("descriptors[{d}]."),
                value: hits,
                max: MAX_HITS_ADDEND,
            });
        }
    }
    Ok(())
}
