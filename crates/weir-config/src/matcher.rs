//! Request matching (stub; implementation follows).

use crate::error::MatchError;
use crate::request::{Descriptor, Matched};
use crate::ruleset::RuleSet;

impl RuleSet {
    /// Matches a request's descriptors against `domain`'s rules: one entry per descriptor,
    /// `None` when no rule applies (the descriptor is allowed). Checks the request
    /// [limits](crate::limits) first; an unknown domain is [`MatchError::UnknownDomain`].
    ///
    /// Each descriptor's entries walk down the tree in order; at each level an exact
    /// `key`+`value` node beats a prefix (`value: foo*`, first in file order) which beats a
    /// key-only node. The rule applies only if the walk reaches the last entry on a node
    /// with a rule (envoyproxy/ratelimit's semantics). A matched rule whose name is listed
    /// in another matched rule's `replaces` is dropped (`None`).
    pub fn matches(
        &self,
        domain: &str,
        descriptors: &[Descriptor],
    ) -> Result<Vec<Option<Matched>>, MatchError> {
        let _ = self.domain(domain);
        let _ = descriptors;
        Err(MatchError::UnknownDomain(domain.to_string()))
    }
}
