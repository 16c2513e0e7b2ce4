//! The key argument of every [`Store`](super::Store) operation: a key and which record it
//! names, the key's own or its record under the rule it is applied with (what a
//! [`Limiter`](crate::Limiter) uses, so that two rules on one key never share a record).
//! Built by the caller before the store is touched; a store reads the scope off it where
//! it keeps its records (beside the key in memory, in the record's name over the network).

use std::borrow::Cow;

use crate::key::Key;
use crate::rule::Rule;

/// A key, and whether it names its record under the rule it is applied with (see
/// [`Rule::named`]) or the key's own record. Cheap to copy: it borrows the key.
///
/// ```
/// use weir_core::{Key, Rule, ScopedKey};
/// let key = Key::new("alice")?;
/// let rule = Rule::per_second(5)?.named("api");
/// assert_eq!(ScopedKey::plain(&key).record(&rule).as_bytes(), b"alice");
/// let scoped = ScopedKey::scoped(&key).record(&rule);
/// assert!(scoped.as_bytes().ends_with(b":alice"));
/// assert_eq!(scoped.as_bytes().len(), 16 + 1 + 5);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScopedKey<'a> {
    key: &'a Key,
    scoped: bool,
}

impl<'a> ScopedKey<'a> {
    /// The record of `key` alone, whatever rule it is applied with.
    pub fn plain(key: &'a Key) -> Self {
        Self { key, scoped: false }
    }

    /// The record of (`rule`, `key`) for the rule it is applied with: what a
    /// [`Limiter`](crate::Limiter) asks for.
    pub fn scoped(key: &'a Key) -> Self {
        Self { key, scoped: true }
    }

    /// The key, as the caller built it.
    pub fn key(self) -> &'a Key {
        self.key
    }

    /// Whether the record is the key's under its rule ([`scoped`](Self::scoped)).
    pub fn is_scoped(self) -> bool {
        self.scoped
    }

    /// The scope of the record under `rule`: [`Rule::scope`] when scoped, `None` for the
    /// key's own record.
    pub fn scope(self, rule: &Rule) -> Option<u64> {
        self.scoped.then(|| rule.scope())
    }

    /// The record's name for a store that keeps records by bytes (Redis, memcached): the
    /// key itself when plain, else the key scoped by [`Rule::scope`]
    /// (`<16 hex digits>:<key>`, up to 17 bytes longer than [`Key::MAX_LEN`]). Allocates
    /// only for a scoped key of more than 13 bytes.
    pub fn record(self, rule: &Rule) -> Cow<'a, Key> {
        if self.scoped {
            Cow::Owned(self.key.scoped(rule.scope()))
        } else {
            Cow::Borrowed(self.key)
        }
    }
}

/// Several limits checked together ([`Store::check_all`](super::Store::check_all)), each
/// naming its record as a [`ScopedKey`] does: all scoped or all plain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScopedLimits<'a> {
    limits: &'a [(Key, Rule)],
    scoped: bool,
}

impl<'a> ScopedLimits<'a> {
    /// The records of each key alone.
    pub fn plain(limits: &'a [(Key, Rule)]) -> Self {
        Self {
            limits,
            scoped: false,
        }
    }

    /// The records of each (rule, key): what a [`Limiter`](crate::Limiter) asks for.
    pub fn scoped(limits: &'a [(Key, Rule)]) -> Self {
        Self {
            limits,
            scoped: true,
        }
    }

    /// The limits, as the caller built them.
    pub fn as_slice(self) -> &'a [(Key, Rule)] {
        self.limits
    }

    /// Whether each names its record under its rule.
    pub fn is_scoped(self) -> bool {
        self.scoped
    }

    /// How many limits there are.
    pub fn len(self) -> usize {
        self.limits.len()
    }

    /// Whether there are none.
    pub fn is_empty(self) -> bool {
        self.limits.is_empty()
    }

    /// Each limit's key, naming its record as these limits do, and its rule.
    pub fn iter(self) -> impl Iterator<Item = (ScopedKey<'a>, &'a Rule)> {
        self.limits.iter().map(move |(key, rule)| {
            (
                ScopedKey {
                    key,
                    scoped: self.scoped,
                },
                rule,
            )
        })
    }

    /// The limits with their records' names for a store that keeps records by bytes
    /// ([`ScopedKey::record`] of each): the limits themselves when plain. Allocates only
    /// when scoped.
    pub fn records(self) -> Cow<'a, [(Key, Rule)]> {
        if self.scoped {
            Cow::Owned(
                self.limits
                    .iter()
                    .map(|(key, rule)| (key.scoped(rule.scope()), *rule))
                    .collect(),
            )
        } else {
            Cow::Borrowed(self.limits)
        }
    }
}

impl<'a> From<&'a Key> for ScopedKey<'a> {
    /// The key's own record ([`ScopedKey::plain`]).
    fn from(key: &'a Key) -> Self {
        Self::plain(key)
    }
}

impl<'a> From<&'a [(Key, Rule)]> for ScopedLimits<'a> {
    /// The keys' own records ([`ScopedLimits::plain`]).
    fn from(limits: &'a [(Key, Rule)]) -> Self {
        Self::plain(limits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scoped_record_is_the_key_under_its_rules_scope_and_a_plain_one_the_key() {
        let key = Key::new("user:42").unwrap();
        let rule = Rule::per_second(3).unwrap();
        let plain = ScopedKey::plain(&key);
        assert!(matches!(plain.record(&rule), Cow::Borrowed(k) if k == &key));
        assert_eq!(plain.scope(&rule), None);
        let scoped = ScopedKey::scoped(&key);
        assert_eq!(scoped.scope(&rule), Some(rule.scope()));
        assert_eq!(*scoped.record(&rule), key.scoped(rule.scope()));
        let limits = [(key.clone(), rule)];
        assert!(matches!(
            ScopedLimits::plain(&limits).records(),
            Cow::Borrowed(_)
        ));
        let records = ScopedLimits::scoped(&limits).records();
        assert_eq!(records[0].0, key.scoped(rule.scope()));
        let each: Vec<bool> = ScopedLimits::scoped(&limits)
            .iter()
            .map(|(k, _)| k.is_scoped())
            .collect();
        assert_eq!(each, [true]);
    }
}
