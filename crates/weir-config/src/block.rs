//! A node's limit: a ratelimit `rate_limit:` block or a Weir `rule:` block, validated into a
//! [`Limit`] plus its policies. Every parameter is checked here or by weir-core's rule
//! constructors, whose `RuleError` message is reported at the parameter's path. Called by
//! `compile.rs` for each node that has a limit.

use serde_saphyr::Spanned;
use weir_core::{FailurePolicy, Lockout, Rule, RuleError};

use crate::duration::{self, parse_duration};
use crate::info::Format;
use crate::params::{self, BuildError, Kind, Value};
use crate::place::{line_of, Place};
use crate::raw::{RawLockout, RawRateLimit, RawReplace, RawRule};
use crate::request::{Limit, RateLimitSpec};
use crate::unit::Unit;
use crate::ConfigError;

/// A validated limit and its policies, before it is placed in the tree.
pub(crate) struct Block {
    pub(crate) format: Format,
    pub(crate) limit: Limit,
    pub(crate) rate_limit: Option<RateLimitSpec>,
    pub(crate) name: Option<String>,
    pub(crate) replaces: Vec<String>,
    pub(crate) cost: u64,
    pub(crate) shadow: Option<bool>,
    pub(crate) enforce_percent: u8,
}

const UNITS: &str = "second, minute, hour, day, week, month or year";

/// A ratelimit `rate_limit` block: a fixed window of `unit × unit_multiplier`.
pub(crate) fn rate_limit(raw: &RawRateLimit, at: &Place) -> Result<Block, ConfigError> {
    let name = name(raw.name.as_ref());
    let replaces = replaces(raw.replaces.as_deref(), name.as_deref(), at)?;
    let mut block = Block {
        format: Format::Ratelimit,
        limit: Limit::Unlimited,
        rate_limit: None,
        name,
        replaces,
        cost: 1,
        shadow: None,
        enforce_percent: 100,
    };
    if raw.unlimited.as_ref().is_some_and(|u| u.value) {
        if let Some(unit) = &raw.unit {
            return Err(at
                .field("unit", Some(unit))
                .error("must not be set when unlimited is true"));
        }
        return Ok(block);
    }
    let unit_at = at.field("unit", raw.unit.as_ref());
    let unit_name = raw
        .unit
        .as_ref()
        .ok_or_else(|| unit_at.error(format!("is required ({UNITS})")))?;
    let unit = Unit::parse(&unit_name.value).ok_or_else(|| {
        unit_at.error(format!(
            "invalid unit '{}'; expected {UNITS}",
            unit_name.value
        ))
    })?;
    let rpu_at = at.field("requests_per_unit", raw.requests_per_unit.as_ref());
    let requests_per_unit = raw
        .requests_per_unit
        .as_ref()
        .ok_or_else(|| rpu_at.error("is required (0 blocks every request)"))?;
    let requests_per_unit = non_negative(requests_per_unit.value, &rpu_at)?;
    let multiplier_at = at.field("unit_multiplier", raw.unit_multiplier.as_ref());
    let unit_multiplier = match &raw.unit_multiplier {
        None => 1,
        Some(m) => positive(m.value, &multiplier_at)?,
    };
    let window = unit.times(unit_multiplier);
    let window_at = if raw.unit_multiplier.is_some() {
        multiplier_at
    } else {
        unit_at
    };
    block.rate_limit = Some(RateLimitSpec {
        requests_per_unit,
        unit,
        unit_multiplier,
    });
    block.limit = if requests_per_unit == 0 {
        // Validate the window as a rule would, then deny everything in it.
        Rule::fixed_window(1, window).map_err(|e| window_at.error(e.to_string()))?;
        Limit::Deny { window }
    } else {
        Limit::Rule(Rule::fixed_window(requests_per_unit, window).map_err(|e| {
            let at = if rule_error_field(&e) == "window" {
                &window_at
            } else {
                &rpu_at
            };
            at.error(e.to_string())
        })?)
    };
    Ok(block)
}

/// A Weir `rule` block.
pub(crate) fn rule(raw: &RawRule, at: &Place) -> Result<Block, ConfigError> {
    let name = name(raw.name.as_ref());
    let replaces = replaces(raw.replaces.as_deref(), name.as_deref(), at)?;
    let cost = match &raw.cost {
        None => 1,
        Some(c) => positive(c.value, &at.field("cost", Some(c)))?,
    };
    let enforce_percent = match &raw.enforce_percent {
        None => 100,
        Some(p) => u8::try_from(p.value)
            .ok()
            .filter(|p| *p <= 100)
            .ok_or_else(|| {
                at.field("enforce_percent", Some(p))
                    .error(format!("is {}, expected 0 to 100", p.value))
            })?,
    };
    let mut block = Block {
        format: Format::Weir,
        limit: Limit::Unlimited,
        rate_limit: None,
        name,
        replaces,
        cost,
        shadow: raw.shadow.as_ref().map(|s| s.value),
        enforce_percent,
    };
    if raw.unlimited.as_ref().is_some_and(|u| u.value) {
        if let Some((param, node)) = present_params(raw).first() {
            return Err(at
                .named(param, node.line())
                .error("does not apply to an unlimited rule"));
        }
        if let Some(mode) = &raw.mode {
            return Err(at
                .field("mode", Some(mode))
                .error("does not apply to an unlimited rule"));
        }
        return Ok(block);
    }
    let algorithm_at = at.field("algorithm", raw.algorithm.as_ref());
    let algorithm = raw
        .algorithm
        .as_ref()
        .ok_or_else(|| algorithm_at.error(format!("is required ({})", algorithm_names())))?;
    let mut rule = algorithm_rule(&algorithm.value, raw, at, &algorithm_at)?;
    if let Some(lockout) = &raw.lockout {
        rule = rule.with_lockout(self::lockout(
            &lockout.value,
            &at.field("lockout", Some(lockout)),
        )?);
    }
    if let Some(policy) = &raw.on_failure {
        let policy_at = at.field("on_failure", Some(policy));
        rule = rule.on_failure(match policy.value.as_str() {
            "local_fallback" => FailurePolicy::LocalFallback,
            "fail_open" => FailurePolicy::FailOpen,
            "fail_closed" => FailurePolicy::FailClosed,
            other => {
                return Err(policy_at.error(format!(
                    "invalid failure policy '{other}'; expected local_fallback, fail_open or fail_closed"
                )))
            }
        });
    }
    if let Some(mode) = &raw.mode {
        let mode_at = at.field("mode", Some(mode));
        rule = match mode.value.as_str() {
            "exact" => rule,
            "leased" => rule.leased().map_err(|e| mode_at.error(e.to_string()))?,
            other => {
                return Err(
                    mode_at.error(format!("invalid mode '{other}'; expected exact or leased"))
                )
            }
        };
    }
    block.limit = Limit::Rule(rule);
    Ok(block)
}

/// An algorithm parameter's node in a `rule` block, as written.
enum RawParam<'a> {
    Count(&'a Spanned<i64>),
    Duration(&'a Spanned<String>),
}

impl RawParam<'_> {
    fn line(&self) -> Option<u32> {
        match self {
            Self::Count(node) => line_of(node),
            Self::Duration(node) => line_of(node),
        }
    }
}

/// The node of parameter `name` (a name of the table in `params.rs`), if written.
fn raw_param<'a>(raw: &'a RawRule, name: &str) -> Option<RawParam<'a>> {
    let count = |node: &'a Option<Spanned<i64>>| node.as_ref().map(RawParam::Count);
    let span = |node: &'a Option<Spanned<String>>| node.as_ref().map(RawParam::Duration);
    match name {
        "limit" => count(&raw.limit),
        "rate" => count(&raw.rate),
        "per" => span(&raw.per),
        "burst" => count(&raw.burst),
        "window" => span(&raw.window),
        "precision" => span(&raw.precision),
        "capacity" => count(&raw.capacity),
        "initial_tokens" => count(&raw.initial_tokens),
        "max_depth" => count(&raw.max_depth),
        "max_wait" => span(&raw.max_wait),
        "max_leases" => count(&raw.max_leases),
        "warmup" => span(&raw.warmup),
        "cold_factor" => count(&raw.cold_factor),
        _ => None,
    }
}

/// The algorithm parameters present in a `rule` block, in the table's order, with lines.
fn present_params(raw: &RawRule) -> Vec<(&'static str, RawParam<'_>)> {
    params::all_names()
        .into_iter()
        .filter_map(|name| raw_param(raw, name).map(|node| (name, node)))
        .collect()
}

/// The rule of a `rule` block's algorithm and parameters (lockout and policy come after),
/// as the parameter table in `params.rs` says.
fn algorithm_rule(
    algorithm: &str,
    raw: &RawRule,
    at: &Place,
    algorithm_at: &Place,
) -> Result<Rule, ConfigError> {
    let table = params::algorithm(algorithm).ok_or_else(|| {
        algorithm_at.error(format!(
            "unknown algorithm '{algorithm}'; expected {}",
            algorithm_names()
        ))
    })?;
    let takes_list = table.names();
    let present = present_params(raw);
    let mut values = Vec::with_capacity(present.len());
    for (name, node) in &present {
        let place = at.named(name, node.line());
        let Some(param) = table.reads(name) else {
            return Err(place.error(format!(
                "does not apply to {algorithm} (it takes {takes_list})"
            )));
        };
        let value = match (param.kind, node) {
            (Kind::Count, RawParam::Count(n)) => Value::Count(non_negative(n.value, &place)?),
            (Kind::Duration, RawParam::Duration(text)) => Value::Duration(
                parse_duration(&text.value).map_err(|e| place.error(e.to_string()))?,
            ),
            // The raw field's type is the table's kind (a test checks): unreachable.
            _ => return Err(place.error(format!("is not a {:?}", param.kind))),
        };
        values.push((*name, value));
    }
    let line_of_param = |param: &str| {
        present
            .iter()
            .find(|(p, _)| *p == param)
            .and_then(|(_, node)| node.line())
    };
    table
        .build(|name| values.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
        .map_err(|e| match e {
            BuildError::Missing(param) => at.named(param, None).error(format!(
                "is required for {algorithm} (it takes {takes_list})"
            )),
            BuildError::Rule(e) => {
                let param = params::rule_error_param(&e).unwrap_or("");
                at.named(param, line_of_param(param)).error(e.to_string())
            }
        })
}

/// The algorithm names, as errors list them.
fn algorithm_names() -> String {
    let names: Vec<&str> = params::ALGORITHMS.iter().map(|a| a.name).collect();
    match names.split_last() {
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The `rule` field a weir-core `RuleError` is about.
fn rule_error_field(error: &RuleError) -> &'static str {
    params::rule_error_param(error).unwrap_or("")
}

/// A rule's `lockout` block.
fn lockout(raw: &RawLockout, at: &Place) -> Result<Lockout, ConfigError> {
    let span = |name: &str, node: &Spanned<String>| {
        let place = at.field(name, Some(node));
        duration::parse_duration(&node.value)
            .map(|d| (d, place.clone()))
            .map_err(|e| place.error(e.to_string()))
    };
    let duration_node = raw
        .duration
        .as_ref()
        .ok_or_else(|| at.named("duration", None).error("is required"))?;
    let (base, base_at) = span("duration", duration_node)?;
    let mut lockout = Lockout::new(base).map_err(|e| base_at.error(e.to_string()))?;
    if let Some(max) = &raw.max {
        let (max, max_at) = span("max", max)?;
        lockout = lockout
            .escalating(max)
            .map_err(|e| max_at.error(e.to_string()))?;
    }
    if let Some(forgive) = &raw.forgive_after {
        lockout = lockout.forgive_after(span("forgive_after", forgive)?.0);
    }
    Ok(lockout)
}

/// A block's `name`: empty counts as none (as in ratelimit).
fn name(node: Option<&Spanned<String>>) -> Option<String> {
    node.map(|n| n.value.clone()).filter(|n| !n.is_empty())
}

/// A block's `replaces` names: none empty, none its own name.
fn replaces(
    list: Option<&[Spanned<RawReplace>]>,
    own: Option<&str>,
    at: &Place,
) -> Result<Vec<String>, ConfigError> {
    let list_at = at.named("replaces", None);
    let mut names = Vec::new();
    for (i, entry) in list.unwrap_or_default().iter().enumerate() {
        let entry_at = list_at.index(i, entry);
        let name_at = entry_at.field("name", entry.value.name.as_ref());
        let name = entry
            .value
            .name
            .as_ref()
            .map(|n| n.value.as_str())
            .filter(|n| !n.is_empty())
            .ok_or_else(|| name_at.error("must not be empty"))?;
        if Some(name) == own {
            return Err(name_at.error(format!("a rule cannot replace itself ('{name}')")));
        }
        names.push(name.to_string());
    }
    Ok(names)
}

fn non_negative(value: i64, at: &Place) -> Result<u64, ConfigError> {
    u64::try_from(value).map_err(|_| at.error(format!("is {value}, must not be negative")))
}

fn positive(value: i64, at: &Place) -> Result<u64, ConfigError> {
    u64::try_from(value)
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| at.error(format!("is {value}, must be greater than zero")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every parameter of the table is a `rule:` field of the table's kind, so the rule
    /// files take exactly the table's names.
    #[test]
    fn every_table_parameter_is_a_rule_field_of_its_kind() {
        let mut yaml = String::new();
        for name in params::all_names() {
            let param = params::ALGORITHMS
                .iter()
                .find_map(|a| a.param(name))
                .unwrap();
            yaml.push_str(&format!("{name}: {}\n", param.example));
        }
        let raw: RawRule = serde_saphyr::from_str(&yaml).unwrap();
        for param in params::ALGORITHMS.iter().flat_map(|a| a.params) {
            let kind = match raw_param(&raw, param.name) {
                Some(RawParam::Count(_)) => Kind::Count,
                Some(RawParam::Duration(_)) => Kind::Duration,
                None => panic!("{} is not read from the rule block", param.name),
            };
            assert_eq!(kind, param.kind, "{}", param.name);
        }
        assert_eq!(present_params(&raw).len(), params::all_names().len());
    }
}
