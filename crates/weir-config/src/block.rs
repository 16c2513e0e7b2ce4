//! A node's limit: a ratelimit `rate_limit:` block or a Weir `rule:` block, validated into a
//! [`Limit`] plus its policies. Every parameter is checked here or by weir-core's rule
//! constructors, whose `RuleError` message is reported at the parameter's path. Called by
//! `compile.rs` for each node that has a limit.

use std::time::Duration;

use serde_saphyr::Spanned;
use weir_core::{FailurePolicy, Lockout, Rule, RuleError};

use crate::duration;
use crate::place::{line_of, Place};
use crate::raw::{RawLockout, RawRateLimit, RawReplace, RawRule};
use crate::request::{Limit, RateLimitSpec};
use crate::ruleset::Format;
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
const ALGORITHMS: &str = "fixed_window, sliding_log, sliding_window, weighted_window, \
                          token_bucket, leaky_bucket, gcra, leaky_queue or concurrency";

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
        if let Some((param, line)) = present_params(raw).first() {
            return Err(at
                .named(param, *line)
                .error("does not apply to an unlimited rule"));
        }
        return Ok(block);
    }
    let algorithm_at = at.field("algorithm", raw.algorithm.as_ref());
    let algorithm = raw
        .algorithm
        .as_ref()
        .ok_or_else(|| algorithm_at.error(format!("is required ({ALGORITHMS})")))?;
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
    block.limit = Limit::Rule(rule);
    Ok(block)
}

/// The algorithm parameters present in a `rule` block, in declaration order, with lines.
fn present_params(raw: &RawRule) -> Vec<(&'static str, Option<u32>)> {
    fn line<T>(node: &Option<Spanned<T>>) -> Option<Option<u32>> {
        node.as_ref().map(line_of)
    }
    let all = [
        ("limit", line(&raw.limit)),
        ("rate", line(&raw.rate)),
        ("per", line(&raw.per)),
        ("burst", line(&raw.burst)),
        ("window", line(&raw.window)),
        ("precision", line(&raw.precision)),
        ("capacity", line(&raw.capacity)),
        ("initial_tokens", line(&raw.initial_tokens)),
        ("max_depth", line(&raw.max_depth)),
        ("max_wait", line(&raw.max_wait)),
        ("max_leases", line(&raw.max_leases)),
    ];
    all.into_iter()
        .filter_map(|(name, line)| line.map(|l| (name, l)))
        .collect()
}

/// The parameters each algorithm takes; `None` for an unknown algorithm.
fn parameters(algorithm: &str) -> Option<&'static [&'static str]> {
    Some(match algorithm {
        "fixed_window" | "sliding_log" | "weighted_window" => &["limit", "window"],
        "sliding_window" => &["limit", "window", "precision"],
        "token_bucket" => &["capacity", "rate", "per", "initial_tokens"],
        "leaky_bucket" => &["capacity", "rate", "per"],
        "gcra" => &["rate", "per", "burst"],
        "leaky_queue" => &["rate", "per", "max_depth", "max_wait"],
        "concurrency" => &["max_leases"],
        _ => return None,
    })
}

/// The rule of a `rule` block's algorithm and parameters (lockout and policy come after).
fn algorithm_rule(
    algorithm: &str,
    raw: &RawRule,
    at: &Place,
    algorithm_at: &Place,
) -> Result<Rule, ConfigError> {
    let takes = parameters(algorithm).ok_or_else(|| {
        algorithm_at.error(format!(
            "unknown algorithm '{algorithm}'; expected {ALGORITHMS}"
        ))
    })?;
    let takes_list = takes.join(", ");
    let present = present_params(raw);
    for (param, line) in &present {
        if !takes.contains(param) {
            return Err(at.named(param, *line).error(format!(
                "does not apply to {algorithm} (it takes {takes_list})"
            )));
        }
    }
    let line_of_param = |param: &str| {
        present
            .iter()
            .find(|(p, _)| *p == param)
            .and_then(|(_, line)| *line)
    };
    let missing = |param: &str| {
        at.named(param, None).error(format!(
            "is required for {algorithm} (it takes {takes_list})"
        ))
    };
    let number = |param: &'static str, node: &Option<Spanned<i64>>| -> Result<u64, ConfigError> {
        let node = node.as_ref().ok_or_else(|| missing(param))?;
        non_negative(node.value, &at.field(param, Some(node)))
    };
    let span = |param: &'static str, node: &Option<Spanned<String>>| {
        let node = node.as_ref().ok_or_else(|| missing(param))?;
        duration::parse_duration(&node.value)
            .map_err(|e| at.field(param, Some(node)).error(e.to_string()))
    };
    let built = match algorithm {
        "fixed_window" => {
            Rule::fixed_window(number("limit", &raw.limit)?, span("window", &raw.window)?)
        }
        "sliding_log" => {
            Rule::sliding_log(number("limit", &raw.limit)?, span("window", &raw.window)?)
        }
        "weighted_window" => {
            Rule::weighted_window(number("limit", &raw.limit)?, span("window", &raw.window)?)
        }
        "sliding_window" => Rule::sliding_window(
            number("limit", &raw.limit)?,
            span("window", &raw.window)?,
            span("precision", &raw.precision)?,
        ),
        "token_bucket" => {
            let initial = match &raw.initial_tokens {
                None => None,
                Some(_) => Some(number("initial_tokens", &raw.initial_tokens)?),
            };
            Rule::token_bucket(
                number("capacity", &raw.capacity)?,
                number("rate", &raw.rate)?,
                span("per", &raw.per)?,
            )
            .and_then(|rule| match initial {
                Some(n) => rule.with_initial_tokens(n),
                None => Ok(rule),
            })
        }
        "leaky_bucket" => Rule::leaky_bucket(
            number("capacity", &raw.capacity)?,
            number("rate", &raw.rate)?,
            span("per", &raw.per)?,
        ),
        "gcra" => Rule::gcra(
            number("rate", &raw.rate)?,
            span("per", &raw.per)?,
            number("burst", &raw.burst)?,
        ),
        "leaky_queue" => {
            let max_wait = match &raw.max_wait {
                None => Duration::MAX,
                Some(_) => span("max_wait", &raw.max_wait)?,
            };
            Rule::leaky_queue(
                number("rate", &raw.rate)?,
                span("per", &raw.per)?,
                number("max_depth", &raw.max_depth)?,
                max_wait,
            )
        }
        _ => Rule::concurrency(number("max_leases", &raw.max_leases)?),
    };
    built.map_err(|e| {
        let param = rule_error_field(&e);
        at.named(param, line_of_param(param)).error(e.to_string())
    })
}

/// The `rule` field a weir-core `RuleError` is about.
fn rule_error_field(error: &RuleError) -> &'static str {
    let param: &'static str = match error {
        RuleError::Zero { param }
        | RuleError::TooLarge { param, .. }
        | RuleError::Inconsistent { param, .. } => param,
        RuleError::PrecisionDoesNotDivideWindow { .. } => "precision",
        _ => "",
    };
    match param {
        "period" => "per",
        "window / precision" => "precision",
        other => other,
    }
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
