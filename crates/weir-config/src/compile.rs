//! A rule file → one domain's [`Tree`] and its [`RuleInfo`]s. Walks the descriptor tree
//! depth first in file order: checks each node (a key, no duplicate among its siblings, a
//! `rate_limit` or a `rule` but not both, the nesting depth), hands its limit block to
//! `block.rs`, and numbers rules in file order. The second step of loading, after `yaml.rs`;
//! `ruleset.rs` assembles the results.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_saphyr::Spanned;

use crate::block::{self, Block};
use crate::bounds::{MAX_DEPTH, MAX_DOMAIN_LEN, MAX_KEY_LEN, MAX_VALUE_LEN};
use crate::error::ConfigError;
use crate::info::RuleInfo;
use crate::place::{line_of, Place};
use crate::raw::RawDescriptor;
use crate::tree::{Level, Node, Tree, ValueMatch};
use crate::yaml;

/// One compiled file.
pub(crate) struct Compiled {
    pub(crate) domain: Arc<str>,
    pub(crate) tree: Arc<Tree>,
    pub(crate) rules: Vec<RuleInfo>,
}

/// Parses and validates one rule document.
pub(crate) fn compile(file: &Path, text: &str) -> Result<Compiled, ConfigError> {
    let raw = yaml::parse(file, text)?;
    let root = Place::root(file);
    let domain_at = root.field("domain", raw.domain.as_ref());
    let domain = raw
        .domain
        .as_ref()
        .map(|d| d.value.as_str())
        .ok_or_else(|| domain_at.error("is required"))?;
    if domain.is_empty() {
        return Err(domain_at.error("must not be empty"));
    }
    if domain.len() > MAX_DOMAIN_LEN {
        return Err(domain_at.error(format!(
            "is {} bytes, above the maximum of {MAX_DOMAIN_LEN}",
            domain.len()
        )));
    }
    let domain: Arc<str> = Arc::from(domain);
    let mut compiler = Compiler {
        file,
        domain: Arc::clone(&domain),
        rules: Vec::new(),
    };
    let list = raw.descriptors.as_deref().unwrap_or_default();
    let level = compiler.level(list, &root.named("descriptors", None), &domain, &[], 1)?;
    Ok(Compiled {
        domain,
        tree: Arc::new(Tree {
            root: level,
            rule_count: compiler.rules.len(),
        }),
        rules: compiler.rules,
    })
}

struct Compiler<'a> {
    file: &'a Path,
    domain: Arc<str>,
    rules: Vec<RuleInfo>,
}

/// A descriptor path: `(key, value)` from the domain root down.
type DescriptorPath = Vec<(String, Option<String>)>;

impl Compiler<'_> {
    /// One list of sibling descriptors.
    fn level(
        &mut self,
        list: &[Spanned<RawDescriptor>],
        at: &Place,
        parent_id: &str,
        parent_path: &[(String, Option<String>)],
        depth: usize,
    ) -> Result<Level, ConfigError> {
        if depth > MAX_DEPTH && !list.is_empty() {
            return Err(at.error(format!("descriptors nest deeper than {MAX_DEPTH} levels")));
        }
        let mut level = Level::default();
        // ratelimit's composite keys (`key` or `key_value`) of this level, to refuse duplicates.
        let mut seen: HashMap<String, usize> = HashMap::new();
        for (i, spanned) in list.iter().enumerate() {
            let node_at = at.index(i, spanned);
            let raw = &spanned.value;
            let key_at = node_at.field("key", raw.key.as_ref());
            let key = raw
                .key
                .as_ref()
                .map(|k| k.value.as_str())
                .ok_or_else(|| key_at.error("is required"))?;
            if key.is_empty() {
                return Err(key_at.error("must not be empty"));
            }
            // ratelimit matches a `*` in a key against the request's `key_value` text, so
            // `foo*` there would match other keys: a meaning Weir does not give it.
            if key.contains('*') {
                return Err(key_at.error(
                    "a '*' in a key is not supported (wildcards go in the value: value: prefix*)",
                ));
            }
            // A rule longer than a request may send could never match (and would bloat
            // ids, logs and metrics): the request limits apply to rule files too.
            if key.len() > MAX_KEY_LEN {
                return Err(key_at.error(format!(
                    "is {} bytes, above the maximum of {MAX_KEY_LEN}",
                    key.len()
                )));
            }
            // An empty value is no value, as in ratelimit.
            let value = raw
                .value
                .as_ref()
                .map(|v| v.value.as_str())
                .filter(|v| !v.is_empty());
            if let Some(value) = value.filter(|v| v.len() > MAX_VALUE_LEN) {
                return Err(node_at.field("value", raw.value.as_ref()).error(format!(
                    "is {} bytes, above the maximum of {MAX_VALUE_LEN}",
                    value.len()
                )));
            }
            let composite = match value {
                Some(value) => format!("{key}_{value}"),
                None => key.to_string(),
            };
            let id = format!("{parent_id}.{composite}");
            if let Some(first) = seen.insert(composite, i) {
                return Err(node_at.error(format!(
                    "duplicate descriptor '{id}' (also {}[{first}])",
                    at.path
                )));
            }
            let matcher = match value {
                None => ValueMatch::Any,
                Some(v) if v.contains('*') => {
                    ValueMatch::Wildcard(v.split('*').map(str::to_string).collect())
                }
                Some(v) => ValueMatch::Exact(v.to_string()),
            };
            let share = raw.share_threshold.as_ref().filter(|s| s.value);
            let shared = match (share, &matcher) {
                (None, _) => None,
                (Some(_), ValueMatch::Wildcard(_)) => value.map(str::to_string),
                (Some(flag), _) => {
                    return Err(node_at.field("share_threshold", Some(flag)).error(format!(
                        "can only be used with a wildcard value (containing '*'), but found '{composite_for_error}'",
                        composite_for_error = match value {
                            Some(v) => format!("{key}_{v}"),
                            None => key.to_string(),
                        }
                    )))
                }
            };
            let mut path: DescriptorPath = parent_path.to_vec();
            path.push((key.to_string(), value.map(str::to_string)));
            let rule = self.node_rule(raw, &node_at, &id, &path)?;
            let children = self.level(
                raw.descriptors.as_deref().unwrap_or_default(),
                &node_at.named("descriptors", None),
                &id,
                &path,
                depth + 1,
            )?;
            level.insert(
                key.to_string(),
                matcher,
                Node {
                    rule,
                    shared,
                    children,
                },
            );
        }
        Ok(level)
    }

    /// The node's rule, if it has a `rate_limit` or `rule` block: its index in the domain.
    fn node_rule(
        &mut self,
        raw: &RawDescriptor,
        at: &Place,
        id: &str,
        path: &[(String, Option<String>)],
    ) -> Result<Option<usize>, ConfigError> {
        let block: Block = match (&raw.rate_limit, &raw.rule) {
            (None, None) => return Ok(None),
            (Some(_), Some(rule)) => {
                return Err(at
                    .field("rule", Some(rule))
                    .error("a descriptor takes rate_limit or rule, not both"))
            }
            (Some(rate_limit), None) => {
                block::rate_limit(&rate_limit.value, &at.field("rate_limit", Some(rate_limit)))?
            }
            (None, Some(rule)) => block::rule(&rule.value, &at.field("rule", Some(rule)))?,
        };
        let shadow = match (raw.shadow_mode.as_ref(), block.shadow) {
            (Some(_), Some(_)) => {
                let rule_shadow = raw.rule.as_ref().and_then(|r| r.value.shadow.as_ref());
                return Err(at
                    .named("rule.shadow", rule_shadow.and_then(line_of))
                    .error("set shadow_mode on the descriptor or shadow in the rule, not both"));
            }
            (Some(mode), None) => mode.value,
            (None, shadow) => shadow.unwrap_or(false),
        };
        let index = self.rules.len();
        let limit = block.limit.named(&format!("weir-config/{id}"));
        self.rules.push(RuleInfo {
            id: Arc::from(id),
            domain: Arc::clone(&self.domain),
            path: path.to_vec(),
            file: self.file.to_path_buf(),
            format: block.format,
            name: block.name.map(Arc::from),
            replaces: block.replaces.into_iter().map(Arc::from).collect(),
            limit,
            rate_limit: block.rate_limit,
            cost: block.cost,
            shadow,
            enforce_percent: block.enforce_percent,
            detailed_metric: raw.detailed_metric.as_ref().is_some_and(|d| d.value),
            quota_mode: raw.quota_mode.as_ref().is_some_and(|q| q.value),
        });
        Ok(Some(index))
    }
}
