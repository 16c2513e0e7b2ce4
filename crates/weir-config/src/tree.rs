//! One domain's descriptor tree and the walk down it: the heart of envoyproxy/ratelimit's
//! matching. Built by `compile.rs`, walked by `matcher.rs`; holds rule indexes, not rules.
//!
//! At each level an entry `(key, value)` takes, in this order, the node with that key and
//! exactly that value, else the first prefix node (`value: foo*`, file order) whose prefix
//! starts the value, else the key-only node. There is no backtracking: a chosen node without
//! children ends the walk. The walk yields a rule only if it consumes *every* entry and ends
//! on a node with one; a partial match applies nothing (ratelimit's README, example 4).

use std::collections::HashMap;

/// How a node matches an entry's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ValueMatch {
    /// No `value` in the file: any value (the key's default).
    Any,
    /// `value: x`: exactly `x`.
    Exact(String),
    /// `value: x*`: any value starting with `x`.
    Prefix(String),
}

/// One level of the tree: the nodes under one parent.
#[derive(Debug, Clone, Default)]
pub(crate) struct Level {
    exact: HashMap<String, HashMap<String, Node>>,
    prefixes: Vec<(String, String, Node)>,
    defaults: HashMap<String, Node>,
}

/// A node: maybe a rule (index into the domain's rules) and the level below.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub(crate) rule: Option<usize>,
    pub(crate) children: Level,
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
            ValueMatch::Prefix(prefix) => self.prefixes.push((key, prefix, node)),
        }
    }

    fn is_empty(&self) -> bool {
        self.exact.is_empty() && self.prefixes.is_empty() && self.defaults.is_empty()
    }

    /// The most specific node for one entry.
    fn find(&self, key: &str, value: &str) -> Option<&Node> {
        self.exact
            .get(key)
            .and_then(|values| values.get(value))
            .or_else(|| {
                self.prefixes
                    .iter()
                    .find(|(k, prefix, _)| k == key && value.starts_with(prefix.as_str()))
                    .map(|(_, _, node)| node)
            })
            .or_else(|| self.defaults.get(key))
    }
}

/// A domain's tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tree {
    pub(crate) root: Level,
    pub(crate) rule_count: usize,
}

impl Tree {
    /// The rule (index) the entries reach, if any.
    pub(crate) fn lookup<S: AsRef<str>>(&self, entries: &[(S, S)]) -> Option<usize> {
        let mut level = &self.root;
        let last = entries.len().checked_sub(1)?;
        for (i, (key, value)) in entries.iter().enumerate() {
            let node = level.find(key.as_ref(), value.as_ref())?;
            if i == last {
                return node.rule;
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
            children: Level::default(),
        }
    }

    fn walk(tree: &Tree, entries: &[(&str, &str)]) -> Option<usize> {
        let entries: Vec<_> = entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        tree.lookup(&entries)
    }

    #[test]
    fn exact_beats_prefix_beats_default() {
        let mut root = Level::default();
        root.insert("k".into(), ValueMatch::Any, leaf(0));
        root.insert("k".into(), ValueMatch::Prefix("ab".into()), leaf(1));
        root.insert("k".into(), ValueMatch::Prefix("a".into()), leaf(2));
        root.insert("k".into(), ValueMatch::Exact("abc".into()), leaf(3));
        let tree = Tree {
            root,
            rule_count: 4,
        };
        assert_eq!(walk(&tree, &[("k", "abc")]), Some(3));
        assert_eq!(
            walk(&tree, &[("k", "abd")]),
            Some(1),
            "first prefix in file order"
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
