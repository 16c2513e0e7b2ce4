//! One domain's descriptor tree and the walk down it: the heart of envoyproxy/ratelimit's
//! matching. Built by `compile.rs`, walked by `matcher.rs`; holds rule indexes, not rules.
//!
//! At each level an entry `(key, value)` takes, in this order, the node with that key and
//! exactly that value, else the first wildcard node (a `*` anywhere in the value, any number
//! of them: `foo*`, `bar*b`, `foo*bar*baz`; file order) whose pattern the value matches,
//! else the key-only node. There is no backtracking: a chosen node without children ends the
//! walk. The walk yields a rule only if it consumes *every* entry and ends on a node with
//! one; a partial match applies nothing (ratelimit's README, example 4). A wildcard node
//! with `share_threshold` reports its pattern for that entry, so every value it matches
//! counts against one key (`matcher.rs`).

use foldhash::HashMap;

/// How a node matches an entry's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueMatch {
    /// No `value` in the file: any value (the key's default).
    Any,
    /// `value: x`: exactly `x`.
    Exact(String),
    /// `value` with one or more `*`: the value split on `*` (`bar*b` → `["bar", "b"]`),
    /// matched as ratelimit's `wildcardMatch` does ([`wildcard_match`]).
    Wildcard(Vec<String>),
}

/// Whether `value` matches a pattern split on `*` (each `*` stands for zero or more bytes),
/// exactly as envoyproxy/ratelimit's `wildcardMatch`: the value starts with the first part,
/// ends with the last, is at least as long as all parts together, and holds the middle parts
/// in order, each found at its first place after the one before.
pub(crate) fn wildcard_match(parts: &[String], value: &str) -> bool {
    let (Some(first), Some(last)) = (parts.first(), parts.last()) else {
        return false;
    };
    if parts.len() == 1 {
        return first == value;
    }
    if !value.starts_with(first.as_str()) || !value.ends_with(last.as_str()) {
        return false;
    }
    let fixed: usize = parts.iter().map(String::len).sum();
    if value.len() < fixed {
        return false;
    }
    // Between the first part and the last: both fit without overlap (the length check).
    let Some(mut remaining) = value.get(first.len()..value.len() - last.len()) else {
        return false;
    };
    for part in parts.get(1..parts.len() - 1).unwrap_or_default() {
        match remaining.find(part.as_str()) {
            Some(at) => remaining = remaining.get(at + part.len()..).unwrap_or_default(),
            None => return false,
        }
    }
    true
}

/// One level of the tree: the nodes under one parent. Its maps are built from the rule
/// files, then only looked up, with the entries of every request (up to three hashes a
/// level). A request chooses the key looked up, never what a map holds, so no chain can be
/// flooded and foldhash (seeded) serves; SipHash cost 1.7k instructions a request in `weir
/// proxy`'s walk.
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    exact: HashMap<String, HashMap<String, Node>>,
    wildcards: Vec<(String, Vec<String>, Node)>,
    defaults: HashMap<String, Node>,
}

/// A node: maybe a rule (index into the domain's rules) and the level below.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub(crate) rule: Option<usize>,
    /// `share_threshold: true` on a wildcard node: its written value (`files/*`), which
    /// stands for the value of every entry it matches in the rule's key.
    pub(crate) shared: Option<String>,
    pub(crate) children: Level,
}

/// What a walk reached: the rule and, per entry index, the pattern that replaces the
/// entry's value in the key (`share_threshold`), if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    pub(crate) rule: usize,
    pub(crate) shared: Vec<(usize, String)>,
}

impl Level {
    /// Adds a node. The caller has already refused duplicates.
    pub(crate) fn insert(&mut self, key: String, value: ValueMatch, node: Node) {
        match value {
            ValueMatch::Any => {
                self.defaults.insert(key, node);
            }
            ValueMatch::Exact(value) => {
                self.exact.entry(key).or_default().insert(value, node);
            }
            ValueMatch::Wildcard(parts) => self.wildcards.push((key, parts, node)),
        }
    }

    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.wildcards.is_empty() && self.defaults.is_empty()
    }

    /// The most specific node for one entry, and whether a wildcard chose it.
    fn find(&self, key: &str, value: &str) -> Option<(&Node, bool)> {
        if let Some(node) = self.exact.get(key).and_then(|values| values.get(value)) {
            return Some((node, false));
        }
        if let Some((_, _, node)) = self
            .wildcards
            .iter()
            .find(|(k, parts, _)| k == key && wildcard_match(parts, value))
        {
            return Some((node, true));
        }
        self.defaults.get(key).map(|node| (node, false))
    }

    /// Adds every node of `other` to this level, refusing a `(key, value)` already here
    /// (`MERGE_DOMAIN_CONFIG`): its rule indexes are shifted by `offset`. The duplicate's
    /// `key` or `key_value` is the error.
    pub(crate) fn merge(&mut self, other: Level, offset: usize) -> Result<(), String> {
        for (key, values) in other.exact {
            for (value, node) in values {
                let here = self.exact.entry(key.clone()).or_default();
                if here.contains_key(&value) {
                    return Err(format!("{key}_{value}"));
                }
                here.insert(value, node.shifted(offset));
            }
        }
        for (key, parts, node) in other.wildcards {
            if self
                .wildcards
                .iter()
                .any(|(k, p, _)| *k == key && *p == parts)
            {
                return Err(format!("{key}_{}", parts.join("*")));
            }
            self.wildcards.push((key, parts, node.shifted(offset)));
        }
        for (key, node) in other.defaults {
            if self.defaults.contains_key(&key) {
                return Err(key);
            }
            self.defaults.insert(key, node.shifted(offset));
        }
        Ok(())
    }

    fn shifted(mut self, offset: usize) -> Level {
        for values in self.exact.values_mut() {
            for node in values.values_mut() {
                shift(node, offset);
            }
        }
        for (_, _, node) in &mut self.wildcards {
            shift(node, offset);
        }
        for node in self.defaults.values_mut() {
            shift(node, offset);
        }
        self
    }
}

fn shift(node: &mut Node, offset: usize) {
    node.rule = node.rule.map(|r| r + offset);
    node.children = std::mem::take(&mut node.children).shifted(offset);
}

impl Node {
    fn shifted(mut self, offset: usize) -> Node {
        shift(&mut self, offset);
        self
    }
}

/// A domain's tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    pub(crate) root: Level,
    pub(crate) rule_count: usize,
}

impl Tree {
    /// The rule (index) the entries reach, if any, with the `share_threshold` patterns of
    /// the wildcard nodes the walk took.
    pub(crate) fn lookup<S: AsRef<str>>(&self, entries: &[(S, S)]) -> Option<Found> {
        let mut level = &self.root;
        let last = entries.len().checked_sub(1)?;
        let mut shared = Vec::new();
        for (i, (key, value)) in entries.iter().enumerate() {
            let (node, by_wildcard) = level.find(key.as_ref(), value.as_ref())?;
            if let (true, Some(pattern)) = (by_wildcard, &node.shared) {
                shared.push((i, pattern.clone()));
            }
            if i == last {
                return node.rule.map(|rule| Found { rule, shared });
            }
            if node.children.is_empty() {
                return None;
            }
            level = &node.children;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leaf(rule: usize) -> Node {
        Node {
            rule: Some(rule),
            ..Node::default()
        }
    }

    fn walk(tree: &Tree, entries: &[(&str, &str)]) -> Option<usize> {
        let entries: Vec<_> = entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        tree.lookup(&entries).map(|found| found.rule)
    }

    fn pattern(text: &str) -> Vec<String> {
        text.split('*').map(str::to_string).collect()
    }

    /// ratelimit's own cases for `wildcardMatch` (config_test.go) and its edges.
    #[test]
    fn wildcards_match_as_ratelimit_matches_them() {
        let cases = [
            ("foo*", "foo", true),
            ("foo*", "foobar", true),
            ("foo*", "fo", false),
            ("bar*b", "barab", true),
            ("bar*b", "barb", true),
            ("bar*b", "bar", false),
            ("bar*b", "barXYZb", true),
            ("bar*b", "barXYZ", false),
            ("foo*bar*baz", "foobarbaz", true),
            ("foo*bar*baz", "fooXbarYbaz", true),
            ("foo*bar*baz", "foobaz", false),
            ("foo*bar*baz", "fooXbazYbar", false),
            ("a*a", "a", false),
            ("a*a", "aa", true),
            ("*", "", true),
            ("*x*", "yxy", true),
            ("*x*", "yyy", false),
            ("é*é", "éé", true),
            ("é*é", "é", false),
        ];
        for (p, value, expected) in cases {
            assert_eq!(
                wildcard_match(&pattern(p), value),
                expected,
                "{p} ~ {value}"
            );
        }
    }

    #[test]
    fn exact_beats_prefix_beats_default() {
        let mut root = Level::default();
        root.insert("k".into(), ValueMatch::Any, leaf(0));
        root.insert("k".into(), ValueMatch::Wildcard(pattern("ab*")), leaf(1));
        root.insert("k".into(), ValueMatch::Wildcard(pattern("a*")), leaf(2));
        root.insert("k".into(), ValueMatch::Exact("abc".into()), leaf(3));
        let tree = Tree {
            root,
            rule_count: 4,
        };
        assert_eq!(walk(&tree, &[("k", "abc")]), Some(3));
        assert_eq!(
            walk(&tree, &[("k", "abd")]),
            Some(1),
            "first wildcard in file order"
        );
        assert_eq!(walk(&tree, &[("k", "ax")]), Some(2));
        assert_eq!(walk(&tree, &[("k", "zzz")]), Some(0));
        assert_eq!(walk(&tree, &[("other", "abc")]), None);
        assert_eq!(walk(&tree, &[]), None);
    }

    #[test]
    fn a_partial_walk_applies_nothing() {
        let mut inner = Level::default();
        inner.insert("sub".into(), ValueMatch::Any, leaf(1));
        let mut root = Level::default();
        root.insert(
            "k".into(),
            ValueMatch::Exact("v".into()),
            Node {
                rule: Some(0),
                shared: None,
                children: inner,
            },
        );
        let tree = Tree {
            root,
            rule_count: 2,
        };
        assert_eq!(walk(&tree, &[("k", "v")]), Some(0));
        assert_eq!(walk(&tree, &[("k", "v"), ("sub", "x")]), Some(1));
        assert_eq!(
            walk(&tree, &[("k", "v"), ("sub", "x"), ("more", "y")]),
            None
        );
        assert_eq!(walk(&tree, &[("k", "v"), ("nope", "x")]), None);
    }
}
