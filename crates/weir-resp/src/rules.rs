//! Where `WEIR.CHECK` finds its rules: anything that matches descriptors against the rule
//! files ([`Rules`]). A fixed `weir_config::RuleSet` is one; [`SharedRules`] is one that a
//! reload can swap whole (a command never sees half a reload); `weir serve` can hand its
//! own rule book through a small wrapper of its own.

use std::sync::{Arc, PoisonError, RwLock};

use weir_config::{Descriptor, MatchError, Matched, RuleSet};

/// Matches a request's descriptors against the rules in force, as
/// [`RuleSet::matches`] does.
pub trait Rules: Send + Sync + 'static {
    /// One `Option<Matched>` per descriptor, or why the request cannot be matched.
    fn matches(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Result<Vec<Option<Matched>>, MatchError>;
}

impl Rules for RuleSet {
    fn matches(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Result<Vec<Option<Matched>>, MatchError> {
        RuleSet::matches(self, domain, descriptors)
    }
}

impl<R: Rules + ?Sized> Rules for Arc<R> {
    fn matches(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Result<Vec<Option<Matched>>, MatchError> {
        (**self).matches(domain, descriptors)
    }
}

/// A rule set that can be replaced while the server runs (on reload). Clones share it.
///
/// ```
/// use weir_config::RuleSet;
/// use weir_resp::SharedRules;
/// let rules = SharedRules::new(RuleSet::example());
/// let handle = rules.clone(); // give `rules` to the server, keep `handle` for reloads
/// handle.replace(RuleSet::example());
/// ```
#[derive(Debug, Clone)]
pub struct SharedRules(Arc<RwLock<Arc<RuleSet>>>);

impl SharedRules {
    /// Rules starting as `rules`.
    pub fn new(rules: RuleSet) -> Self {
        Self(Arc::new(RwLock::new(Arc::new(rules))))
    }

    /// Puts `rules` in force for every command from now on.
    pub fn replace(&self, rules: RuleSet) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(rules);
    }

    /// The rules in force.
    pub fn current(&self) -> Arc<RuleSet> {
        Arc::clone(&self.0.read().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Rules for SharedRules {
    fn matches(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Result<Vec<Option<Matched>>, MatchError> {
        self.current().matches(domain, descriptors)
    }
}
